// The recorder's net plugin: ncclNetPlugin_v11 named "Recorder". Its init
// dlopens the net plugin named by RESILIENT_RECORDER_NET_INNER (a path) and
// every call is forwarded to that plugin's ncclNetPlugin_v11, unchanged, and
// then appended as one line to $RESILIENT_RECORDER_DIR/net-<pid>.jsonl.
//
// Comms, memory handles, requests and contexts appear as small integer ids
// (one counter per kind, a fresh id at every creation even when the plugin
// reuses a pointer); data buffers appear neither by address nor by content.
// Polls are folded: test() is recorded when the request completes or fails,
// connect()/accept() when they return a comm or fail, with "polls" counting
// the calls; an isend/irecv that returned no request ("retry") is counted in
// "retries" of the next one on that comm that did.
//
// The optional members (regMrDmaBuf, getDeviceMr, irecvConsumed,
// makeVDevice, setNetAttr) are set to NULL at the first init when the inner
// plugin's are NULL: NCCL tests these pointers, so the recorder must not
// change what NCCL sees (NCCL reads them only after init). That is why the
// exported struct is not const.
#include <dlfcn.h>
#include <stdlib.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "nccl/net_v11.h"
#include "tests/gpu/recorder/jsonl_log.h"
#include "tests/gpu/recorder/process_state.h"
#include "tests/gpu/recorder/warn.h"

extern "C" {
extern __attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11;
}

namespace resilient::recorder {
namespace {

constexpr const char* kInnerEnv = "RESILIENT_RECORDER_NET_INNER";

struct CommEntry {
  uint64_t id = 0;
  uint64_t retries = 0;  // isend/irecv calls that returned no request since the last one that did
};

enum class RequestKind : uint8_t { kSend, kRecv, kFlush };

struct RequestEntry {
  uint64_t id = 0;
  uint64_t polls = 0;
  int n = 1;
  RequestKind kind = RequestKind::kSend;
};

// Process-wide state, created by the first init. It is never destroyed
// while a context is open (threads of NCCL may still call in at exit); see
// UnloadGuard.
class NetState {
 public:
  NetState() = default;
  ~NetState() {
    if (library != nullptr) {
      dlclose(library);
    }
  }
  NetState(const NetState&) = delete;
  NetState& operator=(const NetState&) = delete;

  JsonlLog log{"net"};
  std::atomic<const ncclNet_v11_t*> inner{nullptr};
  std::atomic<ncclDebugLogger_t> logger{nullptr};

  std::mutex mu;  // guards everything below
  void* library = nullptr;
  std::string innerPath;
  uint64_t lastContext = 0, lastComm = 0, lastMr = 0, lastRequest = 0;
  std::unordered_map<void*, uint64_t> contexts;
  std::unordered_map<void*, CommEntry> comms;
  std::unordered_map<void*, uint64_t> mrs;
  std::unordered_map<void*, RequestEntry> requests;
  std::unordered_map<void*, uint64_t> connectPolls;  // key: NCCL's handle buffer
  std::unordered_map<void*, uint64_t> acceptPolls;   // key: the listen comm
};

using State = ProcessState<NetState>;

// ---- recording ---------------------------------------------------------------

uint64_t lookup(const std::unordered_map<void*, uint64_t>& m, void* p) {
  const auto it = m.find(p);
  return it == m.end() ? 0 : it->second;
}

uint64_t take(std::unordered_map<void*, uint64_t>& m, void* p) {
  const auto it = m.find(p);
  if (it == m.end()) {
    return 0;
  }
  const uint64_t id = it->second;
  m.erase(it);
  return id;
}

uint64_t commId(NetState& s, void* comm) {
  const auto it = s.comms.find(comm);
  return it == s.comms.end() ? 0 : it->second.id;
}

uint64_t newComm(NetState& s, void* comm) {
  CommEntry& e = s.comms[comm];
  e = CommEntry{++s.lastComm, 0};
  return e.id;
}

uint64_t takeComm(NetState& s, void* comm) {
  const auto it = s.comms.find(comm);
  if (it == s.comms.end()) {
    return 0;
  }
  const uint64_t id = it->second.id;
  s.comms.erase(it);
  return id;
}

// The retries folded into this isend/irecv line (and their reset), or one
// more retry when the call returned no request.
uint64_t countRetry(NetState& s, void* comm, bool posted) {
  const auto it = s.comms.find(comm);
  if (it == s.comms.end()) {
    return 0;
  }
  if (!posted) {
    ++it->second.retries;
    return 0;
  }
  const uint64_t n = it->second.retries;
  it->second.retries = 0;
  return n;
}

uint64_t newRequest(NetState& s, void* request, RequestKind kind, int n) {
  RequestEntry& e = s.requests[request];
  e = RequestEntry{++s.lastRequest, 0, n, kind};
  return e.id;
}

// A valid count of grouped receive buffers.
bool validN(int n) {
  return n > 0 && n <= NCCL_PROXY_MAX_SUBS;
}

// ---- forwarding ----------------------------------------------------------------

NetState* liveState() {
  return State::current();
}

// The call when the inner plugin (or the member) is missing.
ncclResult_t missing(NetState* s, const char* call) {
  ncclDebugLogger_t logger = s != nullptr ? s->logger.load() : nullptr;
  const bool loaded = s != nullptr && s->inner.load() != nullptr;
  if (loaded) {
    warn(logger, NCCL_NET | NCCL_INIT,
         "NET/Recorder: %s: the inner net plugin has no %s (a NULL member)", call, call);
  } else {
    warn(logger, NCCL_NET | NCCL_INIT,
         "NET/Recorder: %s called without an inner net plugin (init failed or not called)", call);
  }
  if (s != nullptr) {
    s->log.record(call, [&](JsonFields& f) {
      f.add("error", loaded ? "inner member is NULL" : "no inner plugin");
      f.addResult(static_cast<int>(ncclInternalError));
    });
  }
  return ncclInternalError;
}

// Loads the inner plugin once (s.mu held). On failure returns the error
// text and leaves nothing loaded.
std::string loadInner(NetState& s) {
  if (s.inner.load() != nullptr) {
    return {};
  }
  const char* path = getenv(kInnerEnv);  // NOLINT(concurrency-mt-unsafe): read once, under s.mu
  if (path == nullptr || *path == '\0') {
    return std::string(kInnerEnv) +
           " is not set: set it to the path of the net plugin library to record";
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe): per-thread in glibc
    return std::string(kInnerEnv) + "=" + path +
           ": cannot load the net plugin: " + (why != nullptr ? why : "unknown dlopen error");
  }
  const auto* net = static_cast<const ncclNet_v11_t*>(dlsym(library, "ncclNetPlugin_v11"));
  std::string error;
  if (net == nullptr) {
    error = std::string(kInnerEnv) + "=" + path +
            ": the library exports no ncclNetPlugin_v11 (the recorder forwards ABI v11 only)";
  } else if (net == &ncclNetPlugin_v11) {
    error = std::string(kInnerEnv) + "=" + path + " is the recorder itself";
  }
  if (!error.empty()) {
    dlclose(library);
    return error;
  }
  s.library = library;
  s.innerPath = path;
  // NCCL must see NULL where the inner plugin has a NULL optional member.
  if (net->regMrDmaBuf == nullptr) {
    ncclNetPlugin_v11.regMrDmaBuf = nullptr;
  }
  if (net->getDeviceMr == nullptr) {
    ncclNetPlugin_v11.getDeviceMr = nullptr;
  }
  if (net->irecvConsumed == nullptr) {
    ncclNetPlugin_v11.irecvConsumed = nullptr;
  }
  if (net->makeVDevice == nullptr) {
    ncclNetPlugin_v11.makeVDevice = nullptr;
  }
  if (net->setNetAttr == nullptr) {
    ncclNetPlugin_v11.setNetAttr = nullptr;
  }
  s.inner.store(net, std::memory_order_release);
  return {};
}

ncclResult_t init(void** ctx, uint64_t commHash, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn) noexcept {
  NetState* s = nullptr;
  std::string error;
  try {
    s = &State::acquire();
    if (logFn != nullptr) {
      ncclDebugLogger_t none = nullptr;
      s->logger.compare_exchange_strong(none, logFn);
    }
    std::lock_guard<std::mutex> lock(s->mu);
    error = loadInner(*s);
  } catch (...) {
    warn(logFn, NCCL_NET | NCCL_INIT, "NET/Recorder: init: out of memory");
    return ncclInternalError;
  }
  if (!error.empty()) {
    warn(logFn, NCCL_NET | NCCL_INIT, "NET/Recorder: %s", error.c_str());
    s->log.record("init", [&](JsonFields& f) {
      f.addNull("ctx").addHex("commId", commHash).add("error", error.c_str());
      f.addResult(static_cast<int>(ncclInvalidUsage));
    });
    return ncclInvalidUsage;
  }
  const ncclNet_v11_t* inner = s->inner.load(std::memory_order_acquire);
  if (inner->init == nullptr) {
    return missing(s, "init");
  }
  void* innerCtx = nullptr;
  const ncclResult_t rc = inner->init(&innerCtx, commHash, config, logFn, profFn);
  if (ctx != nullptr) {
    *ctx = innerCtx;
  }
  // Every context is registered, recording or not: the unload guard frees
  // the state only when none is open.
  uint64_t id = 0;
  if (rc == ncclSuccess || innerCtx != nullptr) {
    try {
      std::lock_guard<std::mutex> lock(s->mu);
      id = ++s->lastContext;
      s->contexts[innerCtx] = id;
    } catch (...) {  // NOLINT(bugprone-empty-catch): the context goes unnamed in the file
    }
  }
  s->log.record("init", [&](JsonFields& f) {
    f.addId("ctx", id).addHex("commId", commHash);
    if (config != nullptr) {
      f.add("trafficClass", config->trafficClass);
    } else {
      f.addNull("trafficClass");
    }
    // innerPath is set before inner is published, and never changes after.
    f.add("profFn", profFn != nullptr)
        .add("inner", s->innerPath.c_str())
        .add("innerName", inner->name);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t devices(int* ndev) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->devices == nullptr) {
    return missing(s, "devices");
  }
  const ncclResult_t rc = inner->devices(ndev);
  s->log.record("devices", [&](JsonFields& f) {
    if (ndev != nullptr && rc == ncclSuccess) {
      f.add("ndev", *ndev);
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

void addProperties(JsonFields& f, const ncclNetProperties_v11_t& p) {
  f.key("props").beginObject();
  f.add("name", p.name).add("pciPath", p.pciPath).addHex("guid", p.guid);
  f.add("ptrSupport", p.ptrSupport).add("regIsGlobal", p.regIsGlobal);
  f.add("forceFlush", p.forceFlush).add("speed", p.speed).add("port", p.port);
  f.add("latency", p.latency).add("maxComms", p.maxComms).add("maxRecvs", p.maxRecvs);
  f.add("netDeviceType", static_cast<int>(p.netDeviceType));
  f.add("netDeviceVersion", p.netDeviceVersion);
  f.key("vProps").beginObject().add("ndevs", p.vProps.ndevs).key("devs").beginArray();
  for (int i = 0; i < p.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) {
    f.value(p.vProps.devs[i]);
  }
  f.endArray().endObject();
  f.add("maxP2pBytes", p.maxP2pBytes).add("maxCollBytes", p.maxCollBytes);
  f.add("maxMultiRequestSize", p.maxMultiRequestSize);
  f.endObject();
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->getProperties == nullptr) {
    return missing(s, "getProperties");
  }
  const ncclResult_t rc = inner->getProperties(dev, props);
  s->log.record("getProperties", [&](JsonFields& f) {
    f.add("dev", dev);
    if (props != nullptr && rc == ncclSuccess) {
      addProperties(f, *props);
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->listen == nullptr) {
    return missing(s, "listen");
  }
  const ncclResult_t rc = inner->listen(ctx, dev, handle, listenComm);
  s->log.record("listen", [&](JsonFields& f) {
    void* comm = listenComm != nullptr ? *listenComm : nullptr;
    uint64_t ctxId = 0, id = 0;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      ctxId = lookup(s->contexts, ctx);
      if (rc == ncclSuccess && comm != nullptr) {
        id = newComm(*s, comm);
      }
    }
    f.addId("ctx", ctxId).add("dev", dev).addId("listenComm", id);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

// Counts one more poll of a pending connect/accept (keyed by `key`), or
// takes the count of a finished one (this call included).
uint64_t countPoll(std::unordered_map<void*, uint64_t>& polls, void* key, bool finished) {
  if (!finished) {
    ++polls[key];
    return 0;
  }
  return take(polls, key) + 1;
}

// connect and accept are polled until they return a comm (or fail): each
// poll is counted against `key`, and one line is written when the call ends.
// `fields(f, id)` adds the call's own members (under s.mu; id: the new comm's).
template <class Fields>
void recordEstablish(NetState& s, const char* call, std::unordered_map<void*, uint64_t>& polls,
                     void* key, void* comm, ncclResult_t rc, bool devAsked, bool devGot,
                     Fields&& fields) noexcept {
  if (rc == ncclSuccess && comm == nullptr) {
    if (s.log.recording()) {
      try {
        std::lock_guard<std::mutex> lock(s.mu);
        countPoll(polls, key, false);
      } catch (...) {  // NOLINT(bugprone-empty-catch): only a poll count is lost
      }
    }
    return;
  }
  s.log.record(call, [&](JsonFields& f) {
    std::lock_guard<std::mutex> lock(s.mu);
    const uint64_t n = countPoll(polls, key, true);
    fields(f, comm != nullptr ? newComm(s, comm) : 0);
    f.add("devHandleAsked", devAsked).add("devHandle", devGot).add("polls", n);
    f.addResult(static_cast<int>(rc));
  });
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** sendDevComm) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->connect == nullptr) {
    return missing(s, "connect");
  }
  const ncclResult_t rc = inner->connect(ctx, dev, handle, sendComm, sendDevComm);
  recordEstablish(*s, "connect", s->connectPolls, handle, sendComm != nullptr ? *sendComm : nullptr,
                  rc, sendDevComm != nullptr, sendDevComm != nullptr && *sendDevComm != nullptr,
                  [&](JsonFields& f, uint64_t id) {
                    f.addId("ctx", lookup(s->contexts, ctx)).add("dev", dev).addId("sendComm", id);
                  });
  return rc;
}

ncclResult_t accept(void* listenComm, void** recvComm,
                    ncclNetDeviceHandle_v11_t** recvDevComm) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->accept == nullptr) {
    return missing(s, "accept");
  }
  const ncclResult_t rc = inner->accept(listenComm, recvComm, recvDevComm);
  recordEstablish(*s, "accept", s->acceptPolls, listenComm,
                  recvComm != nullptr ? *recvComm : nullptr, rc, recvDevComm != nullptr,
                  recvDevComm != nullptr && *recvDevComm != nullptr,
                  [&](JsonFields& f, uint64_t id) {
                    f.addId("listenComm", commId(*s, listenComm)).addId("recvComm", id);
                  });
  return rc;
}

// The line of regMr and regMrDmaBuf; `extra` adds the DMA-BUF arguments.
template <class Extra>
void recordRegistration(NetState& s, const char* call, void* comm, size_t size, int type,
                        void** mhandle, ncclResult_t rc, Extra&& extra) {
  s.log.record(call, [&](JsonFields& f) {
    void* mh = mhandle != nullptr ? *mhandle : nullptr;
    uint64_t cid = 0, id = 0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      cid = commId(s, comm);
      if (rc == ncclSuccess && mh != nullptr) {
        id = ++s.lastMr;
        s.mrs[mh] = id;
      }
    }
    f.addId("comm", cid).add("size", size).add("type", type);
    extra(f);
    f.addId("mh", id);
    f.addResult(static_cast<int>(rc));
  });
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->regMr == nullptr) {
    return missing(s, "regMr");
  }
  const ncclResult_t rc = inner->regMr(comm, data, size, type, mhandle);
  recordRegistration(*s, "regMr", comm, size, type, mhandle, rc, [](JsonFields&) {});
  return rc;
}

ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->regMrDmaBuf == nullptr) {
    return missing(s, "regMrDmaBuf");
  }
  const ncclResult_t rc = inner->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  recordRegistration(*s, "regMrDmaBuf", comm, size, type, mhandle, rc,
                     [&](JsonFields& f) { f.add("offset", offset).add("fd", fd); });
  return rc;
}

ncclResult_t deregMr(void* comm, void* mhandle) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->deregMr == nullptr) {
    return missing(s, "deregMr");
  }
  // The id is taken before the call: once deregistered, the pointer may be reused.
  uint64_t cid = 0, id = 0;
  if (s->log.recording()) {
    std::lock_guard<std::mutex> lock(s->mu);
    cid = commId(*s, comm);
    id = take(s->mrs, mhandle);
  }
  const ncclResult_t rc = inner->deregMr(comm, mhandle);
  s->log.record("deregMr", [&](JsonFields& f) {
    f.addId("comm", cid).addId("mh", id);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->isend == nullptr) {
    return missing(s, "isend");
  }
  const ncclResult_t rc = inner->isend(sendComm, data, size, tag, mhandle, phandle, request);
  void* req = request != nullptr ? *request : nullptr;
  if (rc == ncclSuccess && req == nullptr) {  // "retry": counted, not recorded
    if (s->log.recording()) {
      try {
        std::lock_guard<std::mutex> lock(s->mu);
        countRetry(*s, sendComm, false);
      } catch (...) {  // NOLINT(bugprone-empty-catch): nothing allocated here
      }
    }
    return rc;
  }
  s->log.record("isend", [&](JsonFields& f) {
    uint64_t cid = 0, mh = 0, id = 0, retries = 0;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      cid = commId(*s, sendComm);
      mh = lookup(s->mrs, mhandle);
      retries = countRetry(*s, sendComm, true);
      if (req != nullptr) {
        id = newRequest(*s, req, RequestKind::kSend, 1);
      }
    }
    f.addId("sendComm", cid).add("size", size).add("tag", tag).addId("mh", mh);
    f.add("phandle", phandle != nullptr).addId("req", id);
    if (retries != 0) {
      f.add("retries", retries);
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->irecv == nullptr) {
    return missing(s, "irecv");
  }
  const bool optional =
      request != nullptr &&
      *request == reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);  // NOLINT
  const ncclResult_t rc = inner->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  void* req = request != nullptr ? *request : nullptr;
  if (rc == ncclSuccess && req == nullptr) {  // "retry"
    if (s->log.recording()) {
      try {
        std::lock_guard<std::mutex> lock(s->mu);
        countRetry(*s, recvComm, false);
      } catch (...) {  // NOLINT(bugprone-empty-catch): nothing allocated here
      }
    }
    return rc;
  }
  s->log.record("irecv", [&](JsonFields& f) {
    const int count = validN(n) ? n : 0;
    uint64_t cid = 0, id = 0, retries = 0;
    uint64_t mh[NCCL_PROXY_MAX_SUBS] = {};
    {
      std::lock_guard<std::mutex> lock(s->mu);
      cid = commId(*s, recvComm);
      for (int i = 0; i < count && mhandles != nullptr; ++i) {
        mh[i] = lookup(s->mrs, mhandles[i]);
      }
      retries = countRetry(*s, recvComm, true);
      if (req != nullptr) {
        id = newRequest(*s, req, RequestKind::kRecv, count);
      }
    }
    f.addId("recvComm", cid).add("n", n);
    f.key("sizes").beginArray();
    for (int i = 0; i < count && sizes != nullptr; ++i) {
      f.value(sizes[i]);
    }
    f.endArray().key("tags").beginArray();
    for (int i = 0; i < count && tags != nullptr; ++i) {
      f.value(tags[i]);
    }
    f.endArray().key("mh").beginArray();
    for (int i = 0; i < count && mhandles != nullptr; ++i) {
      if (mh[i] == 0) {
        f.nullValue();
      } else {
        f.value(mh[i]);
      }
    }
    f.endArray();
    if (phandles == nullptr) {
      f.addNull("phandles");
    } else {
      f.key("phandles").beginArray();
      for (int i = 0; i < count; ++i) {
        f.value(phandles[i] != nullptr);
      }
      f.endArray();
    }
    f.add("optional", optional).addId("req", id);
    if (retries != 0) {
      f.add("retries", retries);
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->iflush == nullptr) {
    return missing(s, "iflush");
  }
  const ncclResult_t rc = inner->iflush(recvComm, n, data, sizes, mhandles, request);
  s->log.record("iflush", [&](JsonFields& f) {
    void* req = request != nullptr ? *request : nullptr;
    const int count = validN(n) ? n : 0;
    uint64_t cid = 0, id = 0;
    uint64_t mh[NCCL_PROXY_MAX_SUBS] = {};
    {
      std::lock_guard<std::mutex> lock(s->mu);
      cid = commId(*s, recvComm);
      for (int i = 0; i < count && mhandles != nullptr; ++i) {
        mh[i] = lookup(s->mrs, mhandles[i]);
      }
      if (rc == ncclSuccess && req != nullptr) {
        id = newRequest(*s, req, RequestKind::kFlush, count);
      }
    }
    f.addId("recvComm", cid).add("n", n).key("sizes").beginArray();
    for (int i = 0; i < count && sizes != nullptr; ++i) {
      f.value(sizes[i]);
    }
    f.endArray().key("mh").beginArray();
    for (int i = 0; i < count && mhandles != nullptr; ++i) {
      if (mh[i] == 0) {
        f.nullValue();
      } else {
        f.value(mh[i]);
      }
    }
    f.endArray().addId("req", id);  // null: nothing to wait for
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

const char* kindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kSend: return "send";
    case RequestKind::kRecv: return "recv";
    case RequestKind::kFlush: return "flush";
  }
  return "?";
}

ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->test == nullptr) {
    return missing(s, "test");
  }
  const ncclResult_t rc = inner->test(request, done, sizes);
  if (!s->log.recording()) {
    return rc;
  }
  const bool finished = rc != ncclSuccess || (done != nullptr && *done != 0);
  RequestEntry entry;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    const auto it = s->requests.find(request);
    known = it != s->requests.end();
    if (known) {
      ++it->second.polls;
      entry = it->second;
      // A completed receive stays known for irecvConsumed, when NCCL may call it.
      const bool keep =
          entry.kind == RequestKind::kRecv && rc == ncclSuccess && inner->irecvConsumed != nullptr;
      if (finished && !keep) {
        s->requests.erase(it);
      }
    }
  }
  if (!finished) {
    return rc;
  }
  s->log.record("test", [&](JsonFields& f) {
    f.addId("req", entry.id);
    if (known) {
      f.add("kind", kindName(entry.kind));
    }
    if (done != nullptr) {
      f.add("done", *done);
    }
    if (sizes == nullptr || rc != ncclSuccess || done == nullptr || *done == 0) {
      f.addNull("sizes");
    } else {
      const int count = !known || entry.kind == RequestKind::kSend ? 1 : entry.n;
      f.key("sizes").beginArray();
      for (int i = 0; i < count; ++i) {
        f.value(sizes[i]);
      }
      f.endArray();
    }
    f.add("polls", known ? entry.polls : 1);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

// closeSend, closeRecv, closeListen: the id is taken before the call (the
// pointer may be reused once closed); the buffered lines are written out.
using CloseFn = ncclResult_t (*)(void*);

ncclResult_t closeComm(const char* call, const char* key, CloseFn ncclNet_v11_t::*member,
                       void* comm) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->*member == nullptr) {
    return missing(s, call);
  }
  uint64_t id = 0;
  if (s->log.recording()) {
    std::lock_guard<std::mutex> lock(s->mu);
    id = takeComm(*s, comm);
    s->acceptPolls.erase(comm);
  }
  const ncclResult_t rc = (inner->*member)(comm);
  s->log.record(call, [&](JsonFields& f) {
    f.addId(key, id);
    f.addResult(static_cast<int>(rc));
  });
  s->log.flush();
  return rc;
}

ncclResult_t closeSend(void* sendComm) noexcept {
  return closeComm("closeSend", "sendComm", &ncclNet_v11_t::closeSend, sendComm);
}

ncclResult_t closeRecv(void* recvComm) noexcept {
  return closeComm("closeRecv", "recvComm", &ncclNet_v11_t::closeRecv, recvComm);
}

ncclResult_t closeListen(void* listenComm) noexcept {
  return closeComm("closeListen", "listenComm", &ncclNet_v11_t::closeListen, listenComm);
}

ncclResult_t getDeviceMr(void* comm, void* mhandle, void** dptrMhandle) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->getDeviceMr == nullptr) {
    return missing(s, "getDeviceMr");
  }
  const ncclResult_t rc = inner->getDeviceMr(comm, mhandle, dptrMhandle);
  s->log.record("getDeviceMr", [&](JsonFields& f) {
    uint64_t cid = 0, mh = 0;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      cid = commId(*s, comm);
      mh = lookup(s->mrs, mhandle);
    }
    f.addId("comm", cid).addId("mh", mh);
    f.add("dptr", dptrMhandle != nullptr && *dptrMhandle != nullptr);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t irecvConsumed(void* recvComm, int n, void* request) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->irecvConsumed == nullptr) {
    return missing(s, "irecvConsumed");
  }
  uint64_t cid = 0, id = 0;
  if (s->log.recording()) {
    std::lock_guard<std::mutex> lock(s->mu);
    cid = commId(*s, recvComm);
    const auto it = s->requests.find(request);
    if (it != s->requests.end()) {
      id = it->second.id;
      s->requests.erase(it);
    }
  }
  const ncclResult_t rc = inner->irecvConsumed(recvComm, n, request);
  s->log.record("irecvConsumed", [&](JsonFields& f) {
    f.addId("recvComm", cid).add("n", n).addId("req", id);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->makeVDevice == nullptr) {
    return missing(s, "makeVDevice");
  }
  ncclNetVDeviceProps_v11_t in{};
  if (props != nullptr) {
    in = *props;
  }
  const ncclResult_t rc = inner->makeVDevice(d, props);
  s->log.record("makeVDevice", [&](JsonFields& f) {
    if (props != nullptr) {
      f.add("ndevs", in.ndevs).key("devs").beginArray();
      for (int i = 0; i < in.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) {
        f.value(in.devs[i]);
      }
      f.endArray();
    }
    if (d != nullptr && rc == ncclSuccess) {
      f.add("d", *d);
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t finalize(void* ctx) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->finalize == nullptr) {
    // NCCL calls finalize even after a failed init: nothing to forward to.
    if (s != nullptr) {
      s->log.record("finalize", [&](JsonFields& f) {
        f.addNull("ctx").add("inner", false);
        f.addResult(static_cast<int>(ncclSuccess));
      });
      s->log.flush();
    }
    return ncclSuccess;
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    id = take(s->contexts, ctx);  // also when not recording: the unload guard counts contexts
  }
  const ncclResult_t rc = inner->finalize(ctx);
  s->log.record("finalize", [&](JsonFields& f) {
    f.addId("ctx", id);
    f.addResult(static_cast<int>(rc));
  });
  s->log.flush();
  return rc;
}

void addCommAttr(JsonFields& f, const char* name, const ncclNetCommAttr_v11_t& a) {
  f.key(name).beginObject();
  f.add("maxConcurrentPeers", a.maxConcurrentPeers).add("minConcurrentPeers", a.minConcurrentPeers);
  f.add("maxFlowsPerPeer", a.maxFlowsPerPeer).add("minFlowsPerPeer", a.minFlowsPerPeer);
  f.endObject();
}

ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v11_t* attr) noexcept {
  NetState* s = liveState();
  const ncclNet_v11_t* inner = s != nullptr ? s->inner.load() : nullptr;
  if (inner == nullptr || inner->setNetAttr == nullptr) {
    return missing(s, "setNetAttr");
  }
  const ncclResult_t rc = inner->setNetAttr(ctx, attr);
  s->log.record("setNetAttr", [&](JsonFields& f) {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      id = lookup(s->contexts, ctx);
    }
    f.addId("ctx", id);
    if (attr == nullptr) {
      f.addNull("attr");
    } else {
      f.key("attr").beginObject();
      addCommAttr(f, "sendCommAttr", attr->sendCommAttr);
      addCommAttr(f, "recvCommAttr", attr->recvCommAttr);
      f.add("op", attr->op).add("algo", attr->algo).add("proto", attr->proto);
      f.endObject();
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

}  // namespace
}  // namespace resilient::recorder

extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "Recorder",
    resilient::recorder::init,
    resilient::recorder::devices,
    resilient::recorder::getProperties,
    resilient::recorder::listen,
    resilient::recorder::connect,
    resilient::recorder::accept,
    resilient::recorder::regMr,
    resilient::recorder::regMrDmaBuf,
    resilient::recorder::deregMr,
    resilient::recorder::isend,
    resilient::recorder::irecv,
    resilient::recorder::iflush,
    resilient::recorder::test,
    resilient::recorder::closeSend,
    resilient::recorder::closeRecv,
    resilient::recorder::closeListen,
    resilient::recorder::getDeviceMr,
    resilient::recorder::irecvConsumed,
    resilient::recorder::makeVDevice,
    resilient::recorder::finalize,
    resilient::recorder::setNetAttr,
};
}
