// A model of NCCL's host-side communicator lifecycle as a stand-in libnccl
// (see nccl_model.h). Built once per NCCL version by the tests' meson.build
// (NCCL_MODEL_VERSION: the ncclGetVersion code, which also selects the
// version's behaviour, as the real library's version does;
// NCCL_MODEL_NO_FINALIZE: an incomplete library). Our own code, written from
// NCCL's source: "NCCL:" below is NVIDIA/nccl@v2.28.9-1:src/, and the same
// functions of v2.29.7-1 and v2.30.7-1 read the same unless noted.
#include "tests/unit/restart/comm/nccl_model.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl/api.h"

#ifndef NCCL_MODEL_VERSION
#define NCCL_MODEL_VERSION 22809
#endif

#define MODEL_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kVersion = NCCL_MODEL_VERSION;
constexpr bool atLeast(int code) {
  return kVersion >= code;
}
constexpr bool kHasRevoke = atLeast(22807);  // ncclCommRevoke: 2.28.7
constexpr bool kHasShrink = atLeast(22700);  // ncclCommShrink: 2.27
constexpr bool kHasGrow = atLeast(22900);    // ncclCommGrow, ncclCommGetUniqueId: 2.29
// ncclCommDestroy waits, untimed, for every member to destroy too: NCCL
// 2.31.2 as read in ../shared/reference/nccl-lifecycle.md (torch moved to
// "abort, never destroy" for it, pytorch/pytorch#194775). Not in the tags
// mirrored for this project (up to v2.30.7-1; the v2.31 alphas do not have
// it yet), so modelled from that reading.
constexpr bool kDestroyBarrier = atLeast(23100);

NcclModelControl control;

// One mutex and one condition for the whole model: bootstraps, jobs,
// collectives and graph references all wait on it.
std::mutex gMutex;
std::condition_variable gCv;

// NCCL keeps the last WARN of the process (debug.cc: ncclLastError).
// Copied in, not formatted in place: ncclGetLastError reads it without the
// lock, and glibc's vsnprintf first ends the buffer at its first byte, so a
// rank's thread reading while another rank's thread wrote the same text saw no
// last error (restart-comm-nccl, "NCCL's refusal ... at the call", under load).
char gLastError[256] = "";
void warn(const std::string& text) {
  const size_t n = std::min(text.size(), sizeof(gLastError) - 1);
  std::memcpy(gLastError, text.data(), n);
  gLastError[n] = '\0';
}

// NCCL: group.cc, __thread ncclGroupDepth, ncclGroupError and the jobs
// queued in the group (ncclAsyncLaunch queues every job while the depth is
// above 0; ncclGroupEndInternal runs them when it reaches 0).
// (v2.28.9-1 src/group.cc: `__thread int ncclGroupDepth`, `__thread
// ncclResult_t ncclGroupError`: one of each per thread, as here; the TLS
// model below changes where they live, not what they mean.)
// Static TLS (initial-exec): this model is dlopened, and its dynamic TLS
// blocks tripped LeakSanitizer's scan of the threads at exit (a tracer crash,
// "DTLS ... at 0x6d2", in every ASan run of test-restart-loop); the fake net
// plugin's mark has the same model for the same reason.
using Launcher = std::function<ncclResult_t(std::unique_lock<std::mutex>&)>;
__attribute__((tls_model("initial-exec"))) thread_local int tGroupDepth = 0;
__attribute__((tls_model("initial-exec"))) thread_local ncclResult_t tGroupError = ncclSuccess;
__attribute__((tls_model("initial-exec"))) thread_local std::vector<Launcher> tGroupJobs;

struct Clique;

// A creation or launch that runs on NCCL's own thread (ncclAsyncJobMain).
struct Job {
  std::thread thread;
  bool done = false;  // under gMutex
  void join() {
    if (thread.joinable()) {
      thread.join();
    }
  }
};

// One collective across the members of a clique (op index = opCount).
struct Op {
  std::vector<float> sum;
  int arrived = 0;
  std::vector<std::pair<float*, size_t>> outs;
  bool done = false;
};

}  // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int nranks = 0;
  bool blocking = false;
  ncclResult_t asyncResult = ncclSuccess;  // comm->asyncResult
  ncclResult_t proxyResult = ncclSuccess;  // comm->proxyState->asyncResult
  bool abortFlag = false;
  bool revokedFlag = false;
  bool finalizeCalled = false;
  bool destroyFlag = false;
  bool proxyJoined = false;  // the revoke's job joined the proxy threads
  bool initDone = false;     // the creation job ended
  bool pluginAssigned = false;
  int childCount = 0;
  ncclComm* childInInit = nullptr;  // comm->childAbortFlag: a shrink's child being made
  int graphRefs = 0;                // comm->localPersistentRefs
  std::unique_ptr<Job> job;         // comm->groupJob
  long opCount = 0;
  std::shared_ptr<Op> lastOp;  // what this rank's stream last ran
};

namespace {

struct Clique {
  std::string key;
  int nranks = 0;
  std::vector<ncclComm*> members;
  int joined = 0;
  int destroying = 0;   // members inside ncclCommDestroy (2.31's barrier)
  bool idMade = false;  // a grow clique's id, made by the root
  std::map<long, std::shared_ptr<Op>> ops;
};

std::map<std::string, std::weak_ptr<Clique>> gCliques;

std::shared_ptr<Clique> cliqueFor(const std::string& key, int nranks) {
  auto& slot = gCliques[key];
  std::shared_ptr<Clique> c = slot.lock();
  if (!c) {
    c = std::make_shared<Clique>();
    c->key = key;
    c->nranks = nranks;
    c->members.assign(static_cast<size_t>(nranks), nullptr);
    slot = c;
  }
  return c;
}

// The net plugin's reference count: NCCL: plugin/net.cc. The initial count is
// NCCL_NET_PLUGIN_REF_COUNT (NCCL_PARAM NetPluginRefCount, default 0, read once
// in initPluginLibsOnceFunc); ncclNetPluginAssignToComm adds one per
// communicator, ncclNetPluginFinalize (commFree) takes it back and unloads
// the plugin (dlclose) at 0.
int gPluginRefs = -1;
bool gPluginLoaded = false;
void assignPlugin(ncclComm* c) {  // under gMutex
  if (gPluginRefs < 0) {
    const char* env = std::getenv("NCCL_NET_PLUGIN_REF_COUNT");
    gPluginRefs = env != nullptr ? std::atoi(env) : 0;
  }
  if (!gPluginLoaded) {
    gPluginLoaded = true;
    ++control.pluginLoads;
  }
  ++gPluginRefs;
  c->pluginAssigned = true;
}
void releasePlugin(ncclComm* c) {  // under gMutex
  if (!c->pluginAssigned) {
    return;
  }
  c->pluginAssigned = false;
  if (--gPluginRefs == 0 && gPluginLoaded) {
    gPluginLoaded = false;
    ++control.pluginUnloads;
  }
}

// Counts a call that returns with this thread's group depth above the
// depth it began with.
struct DepthWatch {
  int entry = tGroupDepth;
  ~DepthWatch() {
    if (tGroupDepth > entry) {
      ++control.leakedGroups;
    }
  }
};

bool configOk(const ncclConfig_t* config) {
  return config != nullptr && config->magic == NCCL_CONFIG_MAGIC_VALUE &&
         config->size == sizeof(ncclConfig_t) && config->blocking == 0;
}

// Waits under `lock` until `ready` or `deadline` (none: max()).
template <class Pred>
void waitUntil(std::unique_lock<std::mutex>& lock, Pred ready,
               Clock::time_point deadline = Clock::time_point::max()) {
  while (!ready()) {
    if (deadline == Clock::time_point::max()) {
      gCv.wait(lock);
    } else if (gCv.wait_until(lock, deadline) == std::cv_status::timeout) {
      return;
    }
  }
}

// Sleeps `ms`, or less when `c`'s abort flag rises (under gMutex).
void abortableSleep(std::unique_lock<std::mutex>& lock, ncclComm* c, int ms) {
  const auto until = Clock::now() + milliseconds(ms);
  waitUntil(
      lock, [&] { return c->abortFlag || Clock::now() >= until; }, until);
}

// NCCL: init.cc ncclCommGetAsyncError: the communicator's own result, else
// its proxy's (never cleared, not by a revoke either); a finished group job
// is joined. Under gMutex.
ncclResult_t asyncErrorOf(ncclComm* c) {
  ncclResult_t r = c->asyncResult;
  if (r == ncclSuccess) {
    r = c->proxyResult;
  }
  if (r == ncclSuccess && c->job && c->job->done) {
    c->job->join();
    c->job.reset();
  }
  return r;
}

// NCCL: init.cc ncclGroupJobAbort via ncclCommEnsureReady under an abort
// flag: the pending job is told to stop and joined. Releases the lock while
// joining.
void abortJob(std::unique_lock<std::mutex>& lock, ncclComm* c) {
  if (!c->job) {
    return;
  }
  std::unique_ptr<Job> job = std::move(c->job);
  gCv.notify_all();
  lock.unlock();
  job->join();
  lock.lock();
}

// NCCL: init.cc ncclCommEnsureReady: under an abort flag the pending job
// is aborted; otherwise a communicator still in progress is a caller error
// (WARN "Attempt to use communicator before the previous operation returned
// ncclSuccess", ncclInvalidArgument) and an error state is returned as is.
ncclResult_t ensureReady(std::unique_lock<std::mutex>& lock, ncclComm* c) {
  if (c->abortFlag) {
    abortJob(lock, c);
    return ncclSuccess;
  }
  const ncclResult_t r = asyncErrorOf(c);
  if (r == ncclInProgress) {
    warn("Attempt to use communicator before the previous operation returned ncclSuccess");
    return ncclInvalidArgument;
  }
  return r;
}

// NCCL: init.cc setCommAbortFlags: the child's flag too while a child is
// being made (childAbortFlag). Under gMutex.
void setAbortFlag(ncclComm* c, bool value) {
  c->abortFlag = value;
  if (c->childInInit != nullptr) {
    c->childInInit->abortFlag = value;
  }
  gCv.notify_all();
}

// Runs `body` as a job: on a thread of NCCL's for a non-blocking
// communicator (its state reads ncclInProgress meanwhile; NCCL: group.cc
// ncclGroupEndInternal, "nonblocking group"), in the caller's thread for a
// blocking one. `owner` is the communicator the job is attached to; the job
// sets its state at the end. Under gMutex (`lock`).
template <class Body>
ncclResult_t launchJob(std::unique_lock<std::mutex>& lock, ncclComm* owner, Body body) {
  if (owner->blocking) {
    const ncclResult_t r = body(lock);
    owner->asyncResult = r;
    return r;
  }
  abortJob(lock, owner);  // an earlier job of its own: done by now (ensureReady)
  owner->asyncResult = ncclInProgress;
  auto job = std::make_unique<Job>();
  Job* raw = job.get();
  owner->job = std::move(job);
  raw->thread = std::thread([owner, raw, body]() mutable {
    std::unique_lock<std::mutex> l(gMutex);
    const ncclResult_t r = body(l);
    if (owner->asyncResult == ncclInProgress) {
      owner->asyncResult = r;
    }
    raw->done = true;
    gCv.notify_all();
  });
  return ncclInProgress;
}

// The bootstrap of a creation job: joins `clique` as `rank`, then waits for
// every member (abortable through `c`'s flag), then the job's scripted time
// and result. NCCL: init.cc ncclCommInitRankFunc (bootstrap, transports).
ncclResult_t bootstrap(std::unique_lock<std::mutex>& lock, ncclComm* c,
                       const std::shared_ptr<Clique>& clique, int rank, bool grow = false) {
  c->clique = clique;
  c->rank = rank;
  c->nranks = clique->nranks;
  if (clique->members[static_cast<size_t>(rank)] == nullptr) {
    clique->members[static_cast<size_t>(rank)] = c;
    ++clique->joined;
  }
  assignPlugin(c);
  gCv.notify_all();
  waitUntil(lock, [&] { return c->abortFlag || clique->joined == clique->nranks; });
  if (c->abortFlag) {
    // Its listen comms were never accepted: NCCL: transport/net.cc closes
    // a listen comm only in its accept path (recvConnect).
    ++control.leakedListens;
    return ncclInternalError;
  }
  if (control.initDelayMs > 0) {
    abortableSleep(lock, c, control.initDelayMs);
  }
  if (control.initHang || (grow && control.growHang)) {
    waitUntil(lock, [&] { return c->abortFlag; });
  }
  c->initDone = true;
  return c->abortFlag ? ncclInternalError : static_cast<ncclResult_t>(control.readyResult.load());
}

// Frees a communicator: NCCL: init.cc commReclaim -> commDestroySync (when
// not yet finalized or revoked: waits for the stream and for every CUDA
// graph that captured it, localPersistentRefs) -> commFree (joins the proxy
// threads unless a revoke did: their 500 ms poll, proxy.cc; the net plugin
// released, plugin/net.cc ncclNetPluginFinalize). Under gMutex; deletes `c`.
void reclaim(std::unique_lock<std::mutex>& lock, ncclComm* c) {
  if (!c->finalizeCalled) {
    waitUntil(lock, [&] {
      return c->graphRefs == 0 &&
             (!c->lastOp || c->lastOp->done || c->abortFlag || c->proxyResult != ncclSuccess);
    });
  }
  if (!c->proxyJoined) {
    lock.unlock();
    std::this_thread::sleep_for(milliseconds(control.proxyJoinMs.load()));
    lock.lock();
  }
  abortJob(lock, c);
  releasePlugin(c);
  if (c->clique) {
    for (auto& m : c->clique->members) {
      if (m == c) {
        m = nullptr;
      }
    }
  }
  delete c;
  --control.liveComms;
}

ncclComm* newComm(const ncclConfig_t* config) {
  auto* c = new ncclComm();
  // Unset (NCCL_CONFIG_UNDEF_INT) means NCCL's default, blocking.
  c->blocking = config == nullptr || config->blocking != 0;
  ++control.liveComms;
  return c;
}

}  // namespace

namespace {

// Launches one collective: NCCL's opCount grows (proxy.cc ncclProxyStart);
// the sum is complete when every member launched its part. Under gMutex.
void launch(ncclComm* c, const float* send, float* recv, size_t count) {
  ++c->opCount;
  std::shared_ptr<Op>& op = c->clique->ops[c->opCount];
  if (!op) {
    op = std::make_shared<Op>();
    op->sum.assign(count, 0.0f);
  }
  for (size_t i = 0; i < count && i < op->sum.size(); ++i) {
    op->sum[i] += send[i];
  }
  op->outs.emplace_back(recv, count);
  c->lastOp = op;
  if (++op->arrived == c->nranks) {
    for (auto& [out, n] : op->outs) {
      std::memcpy(out, op->sum.data(), std::min(n, op->sum.size()) * sizeof(float));
    }
    op->done = true;
    c->clique->ops.erase(c->opCount);
    gCv.notify_all();
  }
}

// NCCL: group.cc ncclGroupEndInternal: outside a group a caller error
// (WARN, ncclInvalidUsage); inside a nested one only the depth drops; at
// depth 0 the queued jobs run (a non-blocking group's on NCCL's thread:
// ncclInProgress). Under gMutex.
ncclResult_t groupEnd(std::unique_lock<std::mutex>& lock) {
  if (tGroupDepth == 0) {
    warn("ncclGroupEnd: not in a group call.");
    return ncclInvalidUsage;
  }
  if (--tGroupDepth > 0) {
    return ncclSuccess;
  }
  std::vector<Launcher> jobs = std::move(tGroupJobs);
  tGroupJobs.clear();
  const ncclResult_t error = tGroupError;
  tGroupError = ncclSuccess;
  if (error != ncclSuccess) {
    return error;
  }
  ncclResult_t r = ncclSuccess;
  for (Launcher& job : jobs) {
    const ncclResult_t one = job(lock);
    if (r == ncclSuccess || (r == ncclInProgress && one != ncclSuccess)) {
      r = one;
    }
  }
  return r;
}

// NCCL: group.cc ncclAsyncLaunch: a job runs when the group that holds it
// ends; under a depth left open by an earlier call it only queues, and
// runs never.
void queueJob(Launcher job) {
  tGroupJobs.push_back(std::move(job));
}

// Ids never repeat within the process (a clique is found by its id).
std::atomic<int> gIdSequence{0};
// Grow ids the roots made (ncclCommGetUniqueId).
std::set<std::string> gGrowIds;

// The result a non-blocking caller gets after its group ended: the
// communicator's state (NCCL reads ncclCommGetAsyncError there); a blocking
// caller gets the group's. Under gMutex.
ncclResult_t callResult(ncclComm* c, ncclResult_t group) {
  if (c == nullptr || c->blocking || (group != ncclSuccess && group != ncclInProgress)) {
    return group == ncclInProgress ? ncclSuccess : group;
  }
  return asyncErrorOf(c);
}

void groupErrCheck(ncclResult_t r) {
  if (tGroupDepth > 0 && r != ncclSuccess && r != ncclInProgress) {
    tGroupError = r;
  }
}

// The end of a call that began its own group: NCCL's
// ncclGroupErrCheck(res); NCCLCHECK(ncclGroupEndInternal()); return res;
// (NCCLCHECK lets the group's ncclInProgress pass: include/checks.h).
// Under gMutex.
ncclResult_t endCall(std::unique_lock<std::mutex>& lock, ncclResult_t r) {
  groupErrCheck(r);
  const ncclResult_t ended = groupEnd(lock);
  return r != ncclSuccess ? r : (ended == ncclInProgress ? ncclSuccess : ended);
}

}  // namespace

extern "C" {
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm,
                            ncclConfig_t* config, int flags);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* id, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int datatype, int op,
                           ncclComm_t comm, void* stream);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
NcclModelControl* nccl_model_control();
void nccl_model_fail_transfer(void* comm, int result);
void nccl_model_set_async_error(void* comm, int result);
void nccl_model_set_graph_refs(void* comm, int n);
int nccl_model_wait(void* comm, int timeout_ms);
long nccl_model_op_count(void* comm);
}

MODEL_EXPORT NcclModelControl* nccl_model_control() {
  return &control;
}

MODEL_EXPORT void nccl_model_fail_transfer(void* comm, int result) {
  const std::lock_guard<std::mutex> lock(gMutex);
  static_cast<ncclComm*>(comm)->proxyResult = static_cast<ncclResult_t>(result);
  warn("NET/Model: transfer failed");
  gCv.notify_all();
}

MODEL_EXPORT void nccl_model_set_async_error(void* comm, int result) {
  const std::lock_guard<std::mutex> lock(gMutex);
  static_cast<ncclComm*>(comm)->asyncResult = static_cast<ncclResult_t>(result);
  warn("Model: an asynchronous error " + std::to_string(result));
  gCv.notify_all();
}

MODEL_EXPORT void nccl_model_set_graph_refs(void* comm, int n) {
  const std::lock_guard<std::mutex> lock(gMutex);
  static_cast<ncclComm*>(comm)->graphRefs = n;
  gCv.notify_all();
}

MODEL_EXPORT int nccl_model_wait(void* comm, int timeout_ms) {
  std::unique_lock<std::mutex> lock(gMutex);
  auto* c = static_cast<ncclComm*>(comm);
  waitUntil(
      lock,
      [&] {
        return (c->lastOp && c->lastOp->done) || c->abortFlag || c->proxyResult != ncclSuccess;
      },
      Clock::now() + milliseconds(timeout_ms));
  if (c->proxyResult != ncclSuccess) {
    return c->proxyResult;
  }
  return c->lastOp && c->lastOp->done ? ncclSuccess : ncclInProgress;
}

MODEL_EXPORT long nccl_model_op_count(void* comm) {
  const std::lock_guard<std::mutex> lock(gMutex);
  return static_cast<ncclComm*>(comm)->opCount;
}

MODEL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  *version = kVersion;
  return ncclSuccess;
}

MODEL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  const int r = control.uniqueIdResult.load();
  if (r != ncclSuccess) {
    return static_cast<ncclResult_t>(r);
  }
  ++control.uniqueIds;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::snprintf(id->internal, 64, "model-id/%d", ++gIdSequence);
  id->internal[127] = 'z';  // the whole id travels, not a C string
  return ncclSuccess;
}

// NCCL: init.cc ncclCommInitRankConfig -> ncclCommInitRankDev: inside a
// group; the communicator is allocated and stored in *newcomm before its
// job is queued (a non-blocking caller polls it at once).
MODEL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                 int rank, ncclConfig_t* config) {
  DepthWatch watch;
  ++control.inits;
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  std::unique_lock<std::mutex> lock(gMutex);
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks ||
      std::strncmp(id.internal, "model-id/", 9) != 0 || id.internal[127] != 'z') {
    warn("ncclCommInitRankConfig: invalid argument");
    if (comm != nullptr) {
      *comm = nullptr;
    }
    return ncclInvalidArgument;
  }
  const int scripted = control.initResult.load();
  if (scripted != ncclSuccess) {
    *comm = nullptr;
    warn("Model: ncclCommInitRankConfig failed as scripted");
    return static_cast<ncclResult_t>(scripted);
  }
  ++tGroupDepth;
  ncclComm* c = newComm(config);
  *comm = c;
  std::shared_ptr<Clique> clique = cliqueFor(std::string(id.internal), nranks);
  queueJob([c, clique, rank](std::unique_lock<std::mutex>& l) {
    return launchJob(l, c, [c, clique, rank](std::unique_lock<std::mutex>& j) {
      return bootstrap(j, c, clique, rank);
    });
  });
  return callResult(c, groupEnd(lock));
}

MODEL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  if (comm == nullptr || result == nullptr) {
    warn("ncclGetAsyncError : comm argument is NULL");  // NCCL: CommCheck
    return ncclInvalidArgument;
  }
  const std::lock_guard<std::mutex> lock(gMutex);
  *result = asyncErrorOf(comm);
  if (*result == ncclSuccess && control.lateErrorAfterReads >= 0 &&
      control.lateErrorAfterReads-- == 0) {
    comm->proxyResult = ncclRemoteError;
    warn("NET/Model: a peer went away");
  }
  return ncclSuccess;
}

MODEL_EXPORT ncclResult_t ncclGroupStart() {
  ++tGroupDepth;
  return ncclSuccess;
}

MODEL_EXPORT ncclResult_t ncclGroupEnd() {
  std::unique_lock<std::mutex> lock(gMutex);
  return groupEnd(lock);
}

// NCCL: enqueue.cc ncclEnqueueCheck: a revoked communicator is refused
// before any group; otherwise inside a group, ncclCommEnsureReady first,
// the call queued, then ncclGroupEndInternal: only at depth 0 does it
// launch. Under a group depth left open by an earlier call it returns
// success unlaunched.
MODEL_EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int datatype,
                                        int op, ncclComm_t comm, void*) {
  if (comm == nullptr) {
    warn("AllReduce : comm argument is NULL");
    return ncclInvalidArgument;
  }
  std::unique_lock<std::mutex> lock(gMutex);
  if (comm->revokedFlag) {
    warn("AllReduce: communicator was revoked");
    groupErrCheck(ncclInvalidUsage);
    return ncclInvalidUsage;
  }
  ++tGroupDepth;
  ncclResult_t r = ensureReady(lock, comm);
  if (r == ncclSuccess && (datatype != kNcclModelFloat32 || op != kNcclModelSum)) {
    warn("AllReduce: the model reduces float sums only");
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    const auto* s = static_cast<const float*>(send);
    auto* d = static_cast<float*>(recv);
    queueJob([comm, s, d, count](std::unique_lock<std::mutex>& l) {
      if (comm->blocking) {
        launch(comm, s, d, count);
        return ncclSuccess;
      }
      return launchJob(l, comm, [comm, s, d, count](std::unique_lock<std::mutex>&) {
        launch(comm, s, d, count);
        return ncclSuccess;
      });
    });
  } else if (!comm->blocking) {
    comm->asyncResult = r;
  }
  groupErrCheck(r);
  const ncclResult_t ended = groupEnd(lock);
  return r != ncclSuccess ? r : callResult(comm, ended);
}

MODEL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) {
    return ncclSuccess;
  }
  DepthWatch watch;
  ++control.aborts;
  std::unique_lock<std::mutex> lock(gMutex);
  // NCCL: init.cc ncclCommAbort: a group around it, the abort flags raised,
  // ncclCommEnsureReady's result ignored, commReclaim as the group's job
  // (a destroying communicator makes the group blocking: group.cc
  // ncclAsyncLaunch). Under a depth left open before, that job only queues:
  // nothing is freed.
  ++tGroupDepth;
  setAbortFlag(comm, true);
  comm->destroyFlag = true;
  (void)ensureReady(lock, comm);
  queueJob([comm](std::unique_lock<std::mutex>& l) {
    reclaim(l, comm);
    return ncclSuccess;
  });
  return endCall(lock, ncclSuccess);
}

MODEL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) {
    return ncclSuccess;
  }
  DepthWatch watch;
  ++control.destroys;
  std::unique_lock<std::mutex> lock(gMutex);
  // NCCL: init.cc ncclCommDestroy: ncclGroupStartInternal, then
  // NCCLCHECK(ncclCommEnsureReady(comm)), which returns on an error or a
  // communicator still in progress without ncclGroupEndInternal: this
  // thread's group depth stays raised.
  ++tGroupDepth;
  comm->destroyFlag = true;
  const ncclResult_t ready = ensureReady(lock, comm);
  if (ready != ncclSuccess) {
    return ready;
  }
  queueJob([comm](std::unique_lock<std::mutex>& l) {
    if (kDestroyBarrier && comm->clique) {
      std::shared_ptr<Clique> clique = comm->clique;
      ++clique->destroying;
      gCv.notify_all();
      waitUntil(l, [&] {
        int live = 0;
        for (ncclComm* m : clique->members) {
          live += m != nullptr ? 1 : 0;
        }
        return clique->destroying >= live;
      });
    }
    reclaim(l, comm);
    return ncclSuccess;
  });
  return endCall(lock, ncclSuccess);
}

#ifndef NCCL_MODEL_NO_FINALIZE
// NCCL: init.cc ncclCommFinalize: inside a group; ncclCommEnsureReady's
// error fails it (and becomes the communicator's state); a second finalize,
// or one after a revoke (which sets finalizeCalled), is ncclInvalidArgument;
// the job (commDestroySync) waits for the stream and the graphs.
MODEL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ++control.finalizes;
  DepthWatch watch;
  std::unique_lock<std::mutex> lock(gMutex);
  ++tGroupDepth;
  ncclResult_t r = ensureReady(lock, comm);
  if (r == ncclSuccess && comm->finalizeCalled) {
    r = ncclInvalidArgument;
  }
  if (r != ncclSuccess) {
    if (!comm->blocking) {
      comm->asyncResult = r;
    }
    groupErrCheck(r);
    (void)groupEnd(lock);
    return r;
  }
  comm->finalizeCalled = true;
  queueJob([comm](std::unique_lock<std::mutex>& l) {
    return launchJob(l, comm, [comm](std::unique_lock<std::mutex>& j) {
      waitUntil(j, [&] {
        return comm->graphRefs == 0 &&
               (!comm->lastOp || comm->lastOp->done || comm->proxyResult != ncclSuccess);
      });
      return ncclSuccess;
    });
  });
  return callResult(comm, groupEnd(lock));
}
#endif

// NCCL: init.cc ncclCommRevoke (2.28.7): refused while a destroy, finalize
// or revoke is under way; raises the abort flags, ends a pending job, sets
// finalizeCalled; its job (commRevokeAsync) waits for the stream, stops the
// proxy and joins its threads, lowers the flags and stores success as the
// communicator's own state (the proxy's error stays).
MODEL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  if (!kHasRevoke) {
    return ncclInvalidUsage;
  }
  if (comm == nullptr) {
    return ncclSuccess;
  }
  DepthWatch watch;
  std::unique_lock<std::mutex> lock(gMutex);
  if (flags != NCCL_REVOKE_DEFAULT || comm->destroyFlag || comm->finalizeCalled ||
      comm->revokedFlag) {
    return ncclInvalidArgument;
  }
  ++control.revokes;
  ++tGroupDepth;
  setAbortFlag(comm, true);
  comm->revokedFlag = true;
  (void)ensureReady(lock, comm);
  comm->finalizeCalled = true;
  queueJob([comm](std::unique_lock<std::mutex>& l) {
    return launchJob(l, comm, [comm](std::unique_lock<std::mutex>& j) {
      j.unlock();
      std::this_thread::sleep_for(milliseconds(control.proxyJoinMs.load()));
      j.lock();
      comm->proxyJoined = true;
      setAbortFlag(comm, false);
      comm->asyncResult = ncclSuccess;
      return ncclSuccess;
    });
  });
  return callResult(comm, groupEnd(lock));
}

// NCCL: init.cc ncclCommShrink -> ncclCommInitChildComm (2.27). With
// NCCL_SHRINK_ABORT the parent's flags are raised and lowered around a
// stream sync; then ncclCommEnsureReady(parent): a parent whose proxy kept
// an error fails the shrink here (no revoke clears it). *newcomm is set to
// NULL and the child is stored through the caller's pointer by the job's
// thread when the job ends (ncclCommInitRankFunc's exit, success or not);
// the job is attached to the PARENT, whose state reads ncclInProgress
// meanwhile. NCCLCHECK lets the group's ncclInProgress pass and the call
// returns ncclSuccess with *newcomm still NULL.
MODEL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count,
                                         ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  DepthWatch watch;
  ++control.shrinks;
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  control.lastShrinkFlags = flags;
  control.lastShrinkCount = count;
  control.lastShrinkFirst = count > 0 && exclude != nullptr ? exclude[0] : -1;
  std::unique_lock<std::mutex> lock(gMutex);
  ++tGroupDepth;
  if (!kHasShrink || comm == nullptr || newcomm == nullptr || exclude == nullptr || count <= 0) {
    warn("ncclCommShrink: invalid argument");
    return endCall(lock, ncclInvalidArgument);
  }
  if ((flags & NCCL_SHRINK_ABORT) != 0) {
    setAbortFlag(comm, true);
    setAbortFlag(comm, false);
  }
  std::vector<int> excluded(exclude, exclude + count);
  std::sort(excluded.begin(), excluded.end());
  if (std::binary_search(excluded.begin(), excluded.end(), comm->rank)) {
    return endCall(lock, ncclInvalidArgument);
  }
  const ncclResult_t ready = ensureReady(lock, comm);
  if (ready != ncclSuccess) {
    return endCall(lock, ready);
  }
  *newcomm = nullptr;
  const int scripted = control.initResult.load();
  if (scripted != ncclSuccess) {
    return endCall(lock, static_cast<ncclResult_t>(scripted));
  }
  ncclComm* child = newComm(config);
  const int below = static_cast<int>(
      std::lower_bound(excluded.begin(), excluded.end(), comm->rank) - excluded.begin());
  const std::string key = comm->clique->key + "/shrink" + std::to_string(++comm->childCount);
  std::shared_ptr<Clique> clique = cliqueFor(key, comm->nranks - count);
  const int childRank = comm->rank - below;
  comm->childInInit = child;
  queueJob([comm, child, clique, childRank, newcomm](std::unique_lock<std::mutex>& l) {
    const bool late = !comm->blocking;
    return launchJob(
        l, comm, [comm, child, clique, childRank, newcomm, late](std::unique_lock<std::mutex>& j) {
          const ncclResult_t r = bootstrap(j, child, clique, childRank);
          comm->childInInit = nullptr;
          child->asyncResult = r;
          __atomic_store_n(newcomm, child, __ATOMIC_RELEASE);
          if (late) {
            ++control.lateStores;
          }
          return r;
        });
  });
  return endCall(lock, ncclSuccess);
}

// 2.29's ncclCommGetUniqueId: the grow's id, made by the root from its
// ready communicator (the key of its next child).
MODEL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id) {
  ++control.growIds;
  std::unique_lock<std::mutex> lock(gMutex);
  if (!kHasGrow || comm == nullptr || id == nullptr || ensureReady(lock, comm) != ncclSuccess) {
    ++control.badGrows;
    return ncclInvalidArgument;
  }
  const std::string key = comm->clique->key + "/grow" + std::to_string(comm->childCount + 1);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::snprintf(id->internal, sizeof(id->internal), "%s", key.c_str());
  const int r = control.growIdResult.load();
  if (r == ncclSuccess) {
    gGrowIds.insert(key);
  }
  return static_cast<ncclResult_t>(r);
}

// NCCL: v2.29.7-1 init.cc ncclCommGrow: *newcomm is NULL first; existing
// ranks pass their ready communicator (ncclCommEnsureReady) and rank -1,
// new ranks NULL, the root's id and their rank; the new communicator is
// stored in *newcomm before its job is queued, the job is attached to it,
// and ncclCommInitRankFunc stores it again through the caller's pointer at
// its end (so that pointer, too, must outlive the job).
MODEL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* id,
                                       int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  DepthWatch watch;
  if (!kHasGrow || newcomm == nullptr || nRanks <= 0 ||
      (comm != nullptr && nRanks <= comm->nranks)) {
    ++control.badGrows;
    return ncclInvalidArgument;
  }
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  control.lastGrowRanks = nRanks;
  *newcomm = nullptr;
  std::unique_lock<std::mutex> lock(gMutex);
  ++tGroupDepth;
  std::string key;
  int myRank = rank;
  if (comm != nullptr) {
    ++control.grows;
    const ncclResult_t ready = ensureReady(lock, comm);
    if (ready != ncclSuccess) {
      return endCall(lock, ready);
    }
    if (rank != -1) {
      ++control.badGrows;
      return endCall(lock, ncclInvalidArgument);
    }
    key = comm->clique->key + "/grow" + std::to_string(++comm->childCount);
    myRank = comm->rank;
  } else {
    ++control.growJoins;
    if (id == nullptr || rank < 0 || rank >= nRanks) {
      ++control.badGrows;
      return endCall(lock, ncclInvalidArgument);
    }
    key.assign(id->internal, strnlen(id->internal, sizeof(id->internal)));
  }
  if (gGrowIds.count(key) == 0) {
    ++control.badGrows;  // no root made this grow's id: its bootstrap never begins
  }
  const int scripted = control.growResult.load();
  if (scripted != ncclSuccess) {
    return endCall(lock, static_cast<ncclResult_t>(scripted));
  }
  std::shared_ptr<Clique> clique = cliqueFor(key, nRanks);
  ncclComm* c = newComm(config);
  *newcomm = c;
  queueJob([c, clique, myRank, newcomm](std::unique_lock<std::mutex>& l) {
    return launchJob(l, c, [c, clique, myRank, newcomm](std::unique_lock<std::mutex>& j) {
      const ncclResult_t r = bootstrap(j, c, clique, myRank, true);
      __atomic_store_n(newcomm, c, __ATOMIC_RELEASE);
      ++control.lateStores;
      return r;
    });
  });
  const ncclResult_t r = endCall(lock, ncclSuccess);
  return r != ncclSuccess ? r : callResult(c, ncclInProgress);
}

MODEL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

MODEL_EXPORT const char* ncclGetLastError(ncclComm_t) {
  return gLastError;
}
