// The host engine's profiler client (hostengine/profiler_events.h) against a
// recording stand-in for a profiler plugin (an ncclProfiler_v6 table of this
// file): the events of one collective in NCCL 2.28's order, their
// descriptors and parents, the activation mask, handles the profiler did not
// give, a failed init, an operation that fails; then the engine's
// operations, each one collective, on ranks as threads over the in-memory
// transport, and a net plugin without a profiler.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "hostengine/engine.h"
#include "hostengine/profiler_events.h"
#include "nccl/profiler_v6.h"
#include "tests/support/memory_transport.h"
#include "tests/support/mock_logger.h"
#include "tests/unit/hostengine/rank_threads.h"
#include "tests/unit/transport/external/fake_plugin.h"

namespace he = resilient::hostengine;
using resilient::test::MemoryTransport;

namespace {

// What our profiler plugin asks for (plugin/profiler/abi/adapter.cc).
constexpr int kResilientMask = ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                               ncclProfileProxyStep | ncclProfileKernelCh;

// One call the stand-in received.
struct Call {
  std::string what;  // "start Coll", "stop KernelCh", "record GroupApi 23", "init", "finalize"
  int comm = -1;     // the communicator's rank (init's rank argument)
  uintptr_t handle = 0;
  ncclProfilerEventDescr_v6_t descr{};  // starts
  bool nullArgs = false;                // records
  uint64_t stateTimer = 0;              // records: kernelCh.pTimer
};

struct InitArgs {
  uint64_t commId = 0;
  std::string name;
  int nNodes = 0;
  int nranks = 0;
  int rank = -1;
  bool logger = false;
};

const char* typeName(uint64_t type) {
  switch (type) {
    case ncclProfileGroup: return "Group";
    case ncclProfileColl: return "Coll";
    case ncclProfileP2p: return "P2p";
    case ncclProfileKernelCh: return "KernelCh";
    case ncclProfileGroupApi: return "GroupApi";
    case ncclProfileCollApi: return "CollApi";
    case ncclProfileKernelLaunch: return "KernelLaunch";
    default: return "other";
  }
}

// The stand-in's state: what it was told to do, and what it saw (several
// ranks' threads call it at once).
struct Recorder {
  std::mutex mutex;
  int maskToSet = kResilientMask;
  ncclResult_t initResult = ncclSuccess;
  bool nullContext = false;
  uint64_t nullHandleTypes = 0;  // start events of these types return no handle
  uintptr_t nextHandle = 0x1000;
  std::map<uintptr_t, std::pair<int, uint64_t>> handles;  // handle -> (comm, type)
  std::vector<Call> calls;
  std::map<int, InitArgs> inits;

  void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    maskToSet = kResilientMask;
    initResult = ncclSuccess;
    nullContext = false;
    nullHandleTypes = 0;
    handles.clear();
    calls.clear();
    inits.clear();
  }
  // The calls concerning communicator `comm`, as text.
  std::vector<std::string> sequence(int comm) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> out;
    for (const Call& c : calls) {
      if (c.comm == comm) {
        out.push_back(c.what);
      }
    }
    return out;
  }
  std::vector<Call> callsOf(int comm, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Call> out;
    for (const Call& c : calls) {
      if (c.comm == comm && c.what == what) {
        out.push_back(c);
      }
    }
    return out;
  }
};

Recorder gRecorder;

// Handles and contexts are small integers, never dereferenced.
void* opaque(uintptr_t value) {
  return reinterpret_cast<void*>(value);  // NOLINT(performance-no-int-to-ptr)
}

int commOf(void* context) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(context)) - 1;
}

ncclResult_t fakeInit(void** context, uint64_t commId, int* mask, const char* commName, int nNodes,
                      int nranks, int rank, ncclDebugLogger_t logfn) {
  std::lock_guard<std::mutex> lock(gRecorder.mutex);
  gRecorder.inits[rank] = {
      commId, commName != nullptr ? commName : "", nNodes, nranks, rank, logfn != nullptr};
  Call c;
  c.what = "init";
  c.comm = rank;
  gRecorder.calls.push_back(c);
  if (gRecorder.initResult != ncclSuccess) {
    return gRecorder.initResult;
  }
  *mask = gRecorder.maskToSet;
  *context = gRecorder.nullContext ? nullptr : opaque(static_cast<uintptr_t>(rank) + 1);
  return ncclSuccess;
}

ncclResult_t fakeStart(void* context, void** handle, ncclProfilerEventDescr_v6_t* d) {
  std::lock_guard<std::mutex> lock(gRecorder.mutex);
  Call c;
  c.what = std::string("start ") + typeName(d->type);
  // Events under a NULL context (init gave none) are logged as comm -1.
  c.comm = context != nullptr ? commOf(context) : -1;
  c.descr = *d;
  *handle = nullptr;
  if ((gRecorder.nullHandleTypes & d->type) == 0) {
    c.handle = gRecorder.nextHandle++;
    gRecorder.handles[c.handle] = {c.comm, d->type};
    *handle = opaque(c.handle);
  }
  gRecorder.calls.push_back(c);
  return ncclSuccess;
}

ncclResult_t fakeStop(void* handle) {
  std::lock_guard<std::mutex> lock(gRecorder.mutex);
  const auto h = reinterpret_cast<uintptr_t>(handle);
  auto it = gRecorder.handles.find(h);
  Call c;
  c.handle = h;
  c.comm = it != gRecorder.handles.end() ? it->second.first : -2;
  c.what = std::string("stop ") +
           (it != gRecorder.handles.end() ? typeName(it->second.second) : "unknown");
  gRecorder.calls.push_back(c);
  return ncclSuccess;
}

ncclResult_t fakeRecord(void* handle, ncclProfilerEventState_t state,
                        ncclProfilerEventStateArgs_v6_t* args) {
  std::lock_guard<std::mutex> lock(gRecorder.mutex);
  const auto h = reinterpret_cast<uintptr_t>(handle);
  auto it = gRecorder.handles.find(h);
  Call c;
  c.handle = h;
  c.comm = it != gRecorder.handles.end() ? it->second.first : -2;
  c.what = std::string("record ") +
           (it != gRecorder.handles.end() ? typeName(it->second.second) : "unknown") + " " +
           std::to_string(static_cast<int>(state));
  c.nullArgs = args == nullptr;
  c.stateTimer = args != nullptr ? args->kernelCh.pTimer : 0;
  gRecorder.calls.push_back(c);
  return ncclSuccess;
}

ncclResult_t fakeFinalize(void* context) {
  std::lock_guard<std::mutex> lock(gRecorder.mutex);
  Call c;
  c.what = "finalize";
  c.comm = commOf(context);
  gRecorder.calls.push_back(c);
  return ncclSuccess;
}

const ncclProfiler_v6_t kFakeProfiler = {"Fake",   fakeInit,   fakeStart,
                                         fakeStop, fakeRecord, fakeFinalize};

const he::ProfilerTable* fakeTable() {
  return reinterpret_cast<const he::ProfilerTable*>(&kFakeProfiler);
}

// "record GroupApi 23" for the state value.
std::string recordOf(const char* type, int state) {
  return std::string("record ") + type + " " + std::to_string(state);
}

// One collective's events with our profiler's mask, after init.
std::vector<std::string> oneCollective() {
  return {"start GroupApi", recordOf("GroupApi", ncclProfilerGroupStartApiStop),
          "start CollApi",  recordOf("GroupApi", ncclProfilerGroupEndApiStart),
          "start Group",    "start Coll",
          "stop Coll",      "stop Group",
          "stop GroupApi",  "stop CollApi",
          "start KernelCh", recordOf("KernelCh", ncclProfilerKernelChStop),
          "stop KernelCh"};
}

he::ProfiledComm commOfRank(int rank) {
  return {.commId = 0xfeed, .name = "unit", .nNodes = 1, .nranks = 4, .rank = rank};
}

}  // namespace

namespace {

// One all-reduce of one element, enqueued, started and completed.
void oneOperation(he::ProfilerEvents& events) {
  events.enqueued({.func = he::ProfiledFunc::kAllReduce, .count = 1});
  events.started();
  events.completed();
}

}  // namespace

TEST_CASE("one collective: NCCL 2.28's events in its order, parents and descriptor",
          "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  float in[4] = {};
  float out[4] = {};
  {
    he::ProfilerEvents events;
    events.open(transport, fakeTable(), commOfRank(2));
    REQUIRE(events.active());
    events.enqueued({.func = he::ProfiledFunc::kAllReduce,
                     .count = 4,
                     .datatype = "ncclFloat32",
                     .sendBuff = in,
                     .recvBuff = out});
    events.started();
    events.completed();
  }  // the destructor finalizes
  std::vector<std::string> want = {"init"};
  for (const auto& e : oneCollective()) {
    want.push_back(e);
  }
  want.emplace_back("finalize");
  CHECK(gRecorder.sequence(2) == want);

  const InitArgs& init = gRecorder.inits[2];
  CHECK(init.commId == 0xfeed);
  CHECK(init.name == "unit");
  CHECK(init.nNodes == 1);
  CHECK(init.nranks == 4);
  CHECK(init.rank == 2);
  CHECK(init.logger);

  const Call groupApi = gRecorder.callsOf(2, "start GroupApi").at(0);
  const Call collApi = gRecorder.callsOf(2, "start CollApi").at(0);
  const Call group = gRecorder.callsOf(2, "start Group").at(0);
  const Call coll = gRecorder.callsOf(2, "start Coll").at(0);
  const Call kernel = gRecorder.callsOf(2, "start KernelCh").at(0);
  CHECK(groupApi.descr.parentObj == nullptr);
  CHECK(groupApi.descr.groupApi.groupDepth == 1);
  CHECK(reinterpret_cast<uintptr_t>(collApi.descr.parentObj) == groupApi.handle);
  CHECK(std::string(collApi.descr.collApi.func) == "AllReduce");
  CHECK(collApi.descr.collApi.count == 4);
  CHECK(group.descr.parentObj == nullptr);
  CHECK(reinterpret_cast<uintptr_t>(coll.descr.parentObj) == collApi.handle);
  CHECK(reinterpret_cast<uintptr_t>(coll.descr.coll.parentGroup) == group.handle);
  CHECK(coll.descr.rank == 2);
  CHECK(coll.descr.coll.seqNumber == 0);
  CHECK(std::string(coll.descr.coll.func) == "AllReduce");
  CHECK(coll.descr.coll.count == 4);
  CHECK(std::string(coll.descr.coll.datatype) == "ncclFloat32");
  CHECK(coll.descr.coll.sendBuff == in);
  CHECK(coll.descr.coll.recvBuff == out);
  CHECK(coll.descr.coll.root == 0);
  CHECK(coll.descr.coll.nChannels == 1);
  CHECK(std::string(coll.descr.coll.algo) == "RING");
  CHECK(std::string(coll.descr.coll.proto) == "SIMPLE");
  CHECK(reinterpret_cast<uintptr_t>(kernel.descr.parentObj) == coll.handle);
  CHECK(kernel.descr.kernelCh.channelId == 0);
  CHECK(kernel.descr.kernelCh.pTimer == 0);
  // Group API states carry no arguments; KernelChStop carries the stop time.
  for (const Call& c : gRecorder.callsOf(2, recordOf("GroupApi", ncclProfilerGroupStartApiStop))) {
    CHECK(c.nullArgs);
  }
  const Call stop = gRecorder.callsOf(2, recordOf("KernelCh", ncclProfilerKernelChStop)).at(0);
  CHECK_FALSE(stop.nullArgs);
  CHECK(stop.handle == kernel.handle);
}

TEST_CASE("seqNumber counts per function, from 0, as NCCL's comm->seqNumber",
          "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(0));
  for (const he::ProfiledFunc f :
       {he::ProfiledFunc::kAllReduce, he::ProfiledFunc::kAllReduce, he::ProfiledFunc::kBroadcast,
        he::ProfiledFunc::kAllReduce, he::ProfiledFunc::kSendRecv, he::ProfiledFunc::kAllToAll,
        he::ProfiledFunc::kBroadcast}) {
    events.enqueued({.func = f, .count = 8, .datatype = "ncclUint8", .root = 1});
    events.started();
    events.completed();
  }
  events.close();
  std::vector<std::pair<std::string, uint64_t>> seen;
  for (const Call& c : gRecorder.callsOf(0, "start Coll")) {
    seen.emplace_back(c.descr.coll.func, c.descr.coll.seqNumber);
  }
  const std::vector<std::pair<std::string, uint64_t>> want = {
      {"AllReduce", 0}, {"AllReduce", 1}, {"Broadcast", 0}, {"AllReduce", 2},
      {"SendRecv", 0},  {"AlltoAll", 0},  {"Broadcast", 1}};
  CHECK(seen == want);
  CHECK(gRecorder.callsOf(0, "start Coll").at(2).descr.coll.root == 1);
  CHECK(gRecorder.callsOf(0, "stop KernelCh").size() == 7);
}

TEST_CASE("only what the activation mask asks for, and the parents it implies",
          "[hostengine][profiler]") {
  struct Case {
    int mask;
    std::vector<std::string> events;  // of one collective (started and completed)
  };
  const std::string startApi = recordOf("GroupApi", ncclProfilerGroupStartApiStop);
  const std::string endApi = recordOf("GroupApi", ncclProfilerGroupEndApiStart);
  const Case c = GENERATE_COPY(values<Case>({
      // NCCL_RESILIENT_PROFILER=0: our profiler's init asks for nothing.
      {0, {}},
      // The legacy group alone: the Group API event carries it, no Coll.
      {ncclProfileGroup,
       {"start GroupApi", startApi, endApi, "start Group", "stop Group", "stop GroupApi"}},
      // Coll without kernel channels: nothing after the enqueue.
      {ncclProfileColl,
       {"start GroupApi", startApi, "start CollApi", endApi, "start Group", "start Coll",
        "stop Coll", "stop Group", "stop GroupApi", "stop CollApi"}},
      // The API events alone, and a kernel launch.
      {ncclProfileCollApi | ncclProfileKernelLaunch,
       {"start GroupApi", startApi, "start CollApi", endApi, "start KernelLaunch",
        "stop KernelLaunch", "stop GroupApi", "stop CollApi"}},
      // Kernel channels alone imply the whole chain above them.
      {ncclProfileKernelCh, oneCollective()},
      // ProxyCtrl is not an operation's event.
      {ncclProfileProxyCtrl, {}},
  }));
  CAPTURE(c.mask);
  gRecorder.reset();
  gRecorder.maskToSet = c.mask;
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(1));
  CHECK(events.active());
  oneOperation(events);
  events.close();
  std::vector<std::string> want = {"init"};
  want.insert(want.end(), c.events.begin(), c.events.end());
  want.emplace_back("finalize");
  CHECK(gRecorder.sequence(1) == want);
}

TEST_CASE("handles the profiler does not give are never stopped nor passed as parents",
          "[hostengine][profiler]") {
  gRecorder.reset();
  gRecorder.nullHandleTypes = ncclProfileColl | ncclProfileGroupApi;
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(0));
  oneOperation(events);
  events.close();
  const std::vector<std::string> want = {
      "init",          "start GroupApi", "start CollApi",
      "start Group",   "start Coll",     "stop Group",
      "stop CollApi",  "start KernelCh", recordOf("KernelCh", ncclProfilerKernelChStop),
      "stop KernelCh", "finalize"};
  CHECK(gRecorder.sequence(0) == want);
  CHECK(gRecorder.callsOf(0, "start CollApi").at(0).descr.parentObj == nullptr);
  CHECK(gRecorder.callsOf(0, "start KernelCh").at(0).descr.parentObj == nullptr);
}

TEST_CASE("a failed init: no profiler (one WARN), no event, no finalize",
          "[hostengine][profiler]") {
  resilient::test::CapturingLogger logger(resilient::log::Level::kWarn);
  gRecorder.reset();
  gRecorder.initResult = ncclInternalError;
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(0));
  CHECK_FALSE(events.active());
  oneOperation(events);
  events.close();
  CHECK(gRecorder.sequence(0) == std::vector<std::string>{"init"});
  CHECK(logger.count(NCCL_LOG_WARN, "continues without profiler") == 1);
}

TEST_CASE("init without a context: events still go (context NULL), no finalize, as NCCL",
          "[hostengine][profiler]") {
  gRecorder.reset();
  gRecorder.nullContext = true;
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(0));
  CHECK(events.active());
  oneOperation(events);
  events.close();
  CHECK(gRecorder.sequence(0) == std::vector<std::string>{"init"});
  CHECK(gRecorder.sequence(-1) == oneCollective());  // under the NULL context
}

TEST_CASE("a failed operation leaves its kernel channel open until finalize, as NCCL",
          "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, fakeTable(), commOfRank(0));
  events.enqueued({.func = he::ProfiledFunc::kAllReduce, .count = 1});
  events.started();  // ... and the data movement fails: no completed()
  oneOperation(events);
  events.close();
  const auto kernels = gRecorder.callsOf(0, "start KernelCh");
  const auto stops = gRecorder.callsOf(0, "stop KernelCh");
  REQUIRE(kernels.size() == 2);
  REQUIRE(stops.size() == 1);
  CHECK(stops[0].handle == kernels[1].handle);
  CHECK(gRecorder.sequence(0).back() == "finalize");
  CHECK(gRecorder.callsOf(0, "start Coll").at(1).descr.coll.seqNumber == 1);
}

TEST_CASE("a transport that is not a loaded net plugin has no profiler", "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  he::ProfilerEvents events;
  events.open(transport, nullptr, commOfRank(0));
  CHECK_FALSE(events.active());
  oneOperation(events);
  events.close();
  CHECK(gRecorder.calls.empty());
}

namespace {

// What one rank's engine did, for the checks after the threads joined.
struct EngineRun {
  bool profiled = false;
  std::vector<std::string> faults;
};

he::EngineOptions profiledOptions(int rank, int n, he::Pattern pattern) {
  he::EngineOptions o;
  o.rank = rank;
  o.nranks = n;
  o.pattern = pattern;
  o.timeoutMs = 20000;
  o.chunkBytes = 1024;  // several pipeline items
  o.minPieceBytes = 256;
  o.commId = 0xabc0 + static_cast<uint64_t>(pattern);
  o.profilerTable = fakeTable();
  return o;
}

// Runs `body` on `n` rank threads, each with an engine over `transport` set up
// with `options(rank)`; a failed rendezvous or setup is recorded in its run.
std::vector<EngineRun> onEngines(
    int n, resilient::transport::Transport& transport,
    const std::function<he::EngineOptions(int)>& options,
    const std::function<void(int, he::Engine&, he::RendezvousClient&, EngineRun&)>& body) {
  std::vector<EngineRun> runs(static_cast<size_t>(n));
  resilient::test::runRankThreads(
      n, [&](int r, he::RendezvousClient* oob, const resilient::Status& joined) {
        EngineRun& run = runs[static_cast<size_t>(r)];
        if (oob == nullptr) {
          run.faults.push_back(joined.toString());
          return;
        }
        he::Engine engine(transport, *oob, options(r));
        if (auto f = engine.setup(4096)) {
          run.faults.push_back(f->describe());
          return;
        }
        run.profiled = engine.profiled();
        body(r, engine, *oob, run);
      });
  return runs;
}

// The Coll descriptors of `comm`, as (func, count, datatype, seqNumber).
struct CollSeen {
  std::string func;
  size_t count;
  std::string datatype;
  uint64_t seqNumber;
  bool operator==(const CollSeen&) const = default;
};
std::vector<CollSeen> collsOf(int comm) {
  std::vector<CollSeen> out;
  for (const Call& c : gRecorder.callsOf(comm, "start Coll")) {
    out.push_back(
        {c.descr.coll.func, c.descr.coll.count, c.descr.coll.datatype, c.descr.coll.seqNumber});
  }
  return out;
}

}  // namespace

TEST_CASE("every pattern of Engine::run is one collective with its kernel channel closed",
          "[hostengine][profiler]") {
  struct Case {
    he::Pattern pattern;
    int n;
    size_t bytes;
    CollSeen coll;  // seqNumber of the first iteration
  };
  const Case c = GENERATE(values<Case>({
      {he::Pattern::kAllReduce, 3, 4000, {"AllReduce", 1000, "ncclFloat32", 0}},
      {he::Pattern::kSendRecv, 3, 3001, {"SendRecv", 3001, "ncclUint8", 0}},
      {he::Pattern::kAllToAll, 3, 3000, {"AlltoAll", 1000, "ncclUint8", 0}},
      {he::Pattern::kPingPong, 2, 777, {"SendRecv", 777, "ncclUint8", 0}},
  }));
  CAPTURE(static_cast<int>(c.pattern), c.n);
  gRecorder.reset();
  MemoryTransport transport;
  he::EngineOptions base;
  base.commId = 0x5eed;
  base.profilerTable = fakeTable();
  base.chunkBytes = 1024;
  resilient::test::requireClean(resilient::test::runRanks(
      c.n, c.pattern, {c.bytes}, [&](int) -> resilient::transport::Transport& { return transport; },
      base));
  for (int r = 0; r < c.n; ++r) {
    CAPTURE(r);
    CHECK(gRecorder.inits[r].commId == 0x5eed);
    CHECK(gRecorder.inits[r].name == "hostengine");
    CHECK(gRecorder.inits[r].nranks == c.n);
    // runRanks runs each size twice.
    CollSeen second = c.coll;
    second.seqNumber = 1;
    CHECK(collsOf(r) == std::vector<CollSeen>{c.coll, second});
    std::vector<std::string> want = {"init"};
    for (int i = 0; i < 2; ++i) {
      for (const auto& e : oneCollective()) {
        want.push_back(e);
      }
    }
    want.emplace_back("finalize");
    CHECK(gRecorder.sequence(r) == want);
  }
}

TEST_CASE("the user-data operations: allReduceSum, broadcast, barrier, one collective each",
          "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  const int n = 3;
  const auto runs = onEngines(
      n, transport, [](int r) { return profiledOptions(r, n, he::Pattern::kAllReduce); },
      [](int, he::Engine& engine, he::RendezvousClient& oob, EngineRun& run) {
        std::vector<float> data(3000, 1.0f);  // three blocks of at most 1024 floats
        char bytes[100] = {};
        for (auto f : {engine.allReduceSum(data.data(), data.data(), data.size()),
                       engine.broadcast(bytes, sizeof bytes, 1), engine.barrier(),
                       engine.allReduceSum(data.data(), data.data(), 1)}) {
          if (f) {
            run.faults.push_back(f->describe());
          }
        }
        engine.close();
        (void)oob.finish();
      });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(runs[r].faults.empty());
    CHECK(runs[r].profiled);
    const std::vector<CollSeen> want = {{"AllReduce", 3000, "ncclFloat32", 0},
                                        {"Broadcast", 100, "ncclUint8", 0},
                                        {"AllReduce", 0, "ncclFloat32", 1},
                                        {"AllReduce", 1, "ncclFloat32", 2}};
    CHECK(collsOf(r) == want);
    CHECK(gRecorder.callsOf(r, "start Coll").at(1).descr.coll.root == 1);
    CHECK(gRecorder.callsOf(r, "stop KernelCh").size() == 4);
    CHECK(gRecorder.sequence(r).back() == "finalize");
  }
}

TEST_CASE("an operation that fails keeps its kernel channel open; finalize at close",
          "[hostengine][profiler]") {
  gRecorder.reset();
  MemoryTransport transport;
  const int n = 2;
  const auto runs = onEngines(
      n, transport, [](int r) { return profiledOptions(r, n, he::Pattern::kAllReduce); },
      [&transport](int r, he::Engine& engine, he::RendezvousClient& oob, EngineRun& run) {
        he::IterationResult ok = engine.run(4096, 0, {.barrier = true});
        if (ok.fault) {
          run.faults.push_back("first: " + ok.fault->describe());
        }
        // Both ranks are done with the first; the second's own barrier waits
        // for rank 0, which fails every test() from now on.
        (void)oob.barrier();
        if (r == 0) {
          transport.failTestsAfter(0);
        }
        he::IterationResult failed = engine.run(4096, 1, {.barrier = true});
        if (!failed.fault) {
          run.faults.push_back("the second operation did not fail");
        }
        oob.abort("fault");
        engine.close();
      });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(runs[r].faults.empty());
    const auto kernels = gRecorder.callsOf(r, "start KernelCh");
    const auto stops = gRecorder.callsOf(r, "stop KernelCh");
    REQUIRE(kernels.size() == 2);
    REQUIRE(stops.size() == 1);
    CHECK(stops[0].handle == kernels[0].handle);
    CHECK(gRecorder.sequence(r).back() == "finalize");
  }
}

TEST_CASE("a net plugin without a profiler (the fakes) runs unprofiled", "[hostengine][profiler]") {
  resilient::test::FakeModule fake(11);
  auto transport = resilient::test::loadFake(11);
  const int n = 2;
  const auto runs = onEngines(
      n, *transport,
      [](int r) {
        he::EngineOptions o = profiledOptions(r, n, he::Pattern::kAllReduce);
        o.profilerTable = nullptr;  // the plugin library's, which has none
        return o;
      },
      [](int, he::Engine& engine, he::RendezvousClient& oob, EngineRun& run) {
        he::IterationResult result = engine.run(4096, 0, {.barrier = true});
        if (result.fault) {
          run.faults.push_back(result.fault->describe());
        }
        if (result.errors != 0) {
          run.faults.push_back(std::to_string(result.errors) + " wrong elements");
        }
        engine.close();
        (void)oob.finish();
      });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(runs[r].faults.empty());
    CHECK_FALSE(runs[r].profiled);
  }
}
