// The profiler as NCCL loads it, through dlopen: libnccl-profiler-resilient.so
// alone, and inside libnccl-net-resilient.so. Nothing runs at load time, the
// detector thread starts at the first init and is gone after the last
// finalize, load/init/finalize/unload cycles leave no thread or descriptor
// behind, the net plugin and the profiler (also from two libraries) share
// one blackbox region, and both libraries offer v6 and v7 (NCCL 2.29+,
// 2.31+).
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "nccl/net_v11.h"
#include "nccl/profiler_v5.h"
#include "nccl/profiler_v6.h"
#include "nccl/profiler_v7.h"
#include "tests/support/temp_dir.h"

#ifndef RESILIENT_PROFILER_PLUGIN_PATH
#error "RESILIENT_PROFILER_PLUGIN_PATH must name libnccl-profiler-resilient.so"
#endif
#ifndef RESILIENT_NET_PLUGIN_PATH
#error "RESILIENT_NET_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif

namespace resilient::test {
namespace {

size_t countEntries(const char* dir) {
  size_t n = 0;
  DIR* d = opendir(dir);
  if (d == nullptr) {
    return 0;
  }
  while (readdir(d) != nullptr) {
    ++n;
  }
  closedir(d);
  return n;
}
size_t threads() {
  return countEntries("/proc/self/task");
}
size_t descriptors() {
  return countEntries("/proc/self/fd");
}

void quietLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

class Library {
 public:
  explicit Library(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_ != nullptr) {
      dlclose(handle_);
    }
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool loaded() const { return handle_ != nullptr; }
  template <class T>
  const T* symbol(const char* name) const {
    return static_cast<const T*>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

// The environment the libraries read at their first init (they are unloaded
// between test cases, so each resolves it afresh). Changed while no other
// thread runs (the libraries' threads start at init).
class Environment {
 public:
  explicit Environment(const std::string& blackboxDir) {
    setenv("NCCL_RESILIENT_BLACKBOX_DIR", blackboxDir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    setenv("NCCL_RESILIENT_SOCKET_IFNAME", "lo", 1);                // NOLINT(concurrency-mt-unsafe)
  }
  ~Environment() {
    unsetenv("NCCL_RESILIENT_BLACKBOX_DIR");   // NOLINT(concurrency-mt-unsafe)
    unsetenv("NCCL_RESILIENT_SOCKET_IFNAME");  // NOLINT(concurrency-mt-unsafe)
  }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

void* initProfiler(const ncclProfiler_v5_t* p, uint64_t commId) {
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p->init(&ctx, commId, &mask, "lib-test", 1, 2, 0, quietLogger) == ncclSuccess);
  REQUIRE(ctx != nullptr);
  CHECK((mask & ncclProfileKernelCh) != 0);
  return ctx;
}

}  // namespace

TEST_CASE(
    "libnccl-profiler-resilient.so: no thread at load, one per process after init, none "
    "after the last finalize; cycles leave nothing behind",
    "[profiler][library]") {
  TempDir dir;
  Environment env(dir.path().string());
  const size_t baseThreads = threads();
  const size_t baseFds = descriptors();
  for (int cycle = 0; cycle < 20; ++cycle) {
    CAPTURE(cycle);
    Library lib(RESILIENT_PROFILER_PLUGIN_PATH);
    REQUIRE(lib.loaded());
    CHECK(threads() == baseThreads);  // nothing at load time
    const auto* p = lib.symbol<ncclProfiler_v5_t>("ncclProfiler_v5");
    REQUIRE(p != nullptr);
    CHECK(lib.symbol<void>("ncclNetPlugin_v11") == nullptr);
    void* a = initProfiler(p, 0x100 + static_cast<uint64_t>(cycle));
    CHECK(threads() == baseThreads + 1);  // the detector
    void* b = initProfiler(p, 0x200 + static_cast<uint64_t>(cycle));
    CHECK(threads() == baseThreads + 1);  // one per process
    const std::string region = blackbox::regionPath(dir.path().string(), getpid());
    CHECK(std::filesystem::exists(region));
    CHECK(p->finalize(a) == ncclSuccess);
    CHECK(threads() == baseThreads + 1);
    CHECK(p->finalize(b) == ncclSuccess);
    CHECK(threads() == baseThreads);          // stopped with the last communicator
    CHECK(!std::filesystem::exists(region));  // a clean finish removes the region
    CHECK(p->finalize(nullptr) == ncclSuccess);
  }
  CHECK(threads() == baseThreads);
  CHECK(descriptors() == baseFds);
}

TEST_CASE("unloading the library while a communicator is still open stops the thread",
          "[profiler][library]") {
  TempDir dir;
  Environment env(dir.path().string());
  const size_t baseThreads = threads();
  {
    Library lib(RESILIENT_PROFILER_PLUGIN_PATH);
    const auto* p = lib.symbol<ncclProfiler_v5_t>("ncclProfiler_v5");
    REQUIRE(p != nullptr);
    initProfiler(p, 0x300);  // never finalized
    CHECK(threads() == baseThreads + 1);
  }
  CHECK(threads() == baseThreads);
}

TEST_CASE("the net plugin and the profiler, from one library or two, share one blackbox",
          "[profiler][library][blackbox]") {
  TempDir dir;
  Environment env(dir.path().string());
  const std::string region = blackbox::regionPath(dir.path().string(), getpid());
  Library net(RESILIENT_NET_PLUGIN_PATH);
  Library prof(RESILIENT_PROFILER_PLUGIN_PATH);
  REQUIRE(net.loaded());
  REQUIRE(prof.loaded());
  const auto* netApi = net.symbol<ncclNet_v11_t>("ncclNetPlugin_v11");
  const auto* inNet = net.symbol<ncclProfiler_v5_t>("ncclProfiler_v5");
  const auto* separate = prof.symbol<ncclProfiler_v5_t>("ncclProfiler_v5");
  REQUIRE(netApi != nullptr);
  REQUIRE(inNet != nullptr);
  REQUIRE(separate != nullptr);
  CHECK(inNet != separate);

  void* netCtx = nullptr;
  ncclNetCommConfig_v11_t config{-1};
  REQUIRE(netApi->init(&netCtx, 0xAAA, &config, quietLogger, nullptr) == ncclSuccess);
  REQUIRE(std::filesystem::exists(region));
  void* p1 = initProfiler(separate, 0xAAA);  // NCCL_PROFILER_PLUGIN=resilient
  void* p2 = initProfiler(inNet, 0xBBB);     // the profiler NCCL finds in the net plugin
  auto snap = blackbox::readRegion(region);
  REQUIRE(snap.ok());
  CHECK(snap->header.attachCount == 3);
  REQUIRE(snap->comms.size() == 2);
  CHECK(separate->finalize(p1) == ncclSuccess);
  CHECK(inNet->finalize(p2) == ncclSuccess);
  snap = blackbox::readRegion(region);
  REQUIRE(snap.ok());
  CHECK(snap->header.attachCount == 1);
  CHECK(snap->comms.size() == 2);  // finalized slots stay readable
  for (const auto& v : snap->comms) {
    CHECK(v.comm.state == RESILIENT_BLACKBOX_COMM_FINALIZED);
  }
  CHECK(netApi->finalize(netCtx) == ncclSuccess);
  CHECK(!std::filesystem::exists(region));
}

TEST_CASE("ncclProfiler_v6 (NCCL 2.29+) tracks collectives; copy-engine events are passive",
          "[profiler][library][v6]") {
  TempDir dir;
  Environment env(dir.path().string());
  const std::string region = blackbox::regionPath(dir.path().string(), getpid());
  Library lib(RESILIENT_PROFILER_PLUGIN_PATH);
  REQUIRE(lib.loaded());
  const auto* p = lib.symbol<ncclProfiler_v6_t>("ncclProfiler_v6");
  REQUIRE(p != nullptr);
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p->init(&ctx, 0x66, &mask, "v6", 1, 2, 0, quietLogger) == ncclSuccess);
  REQUIRE(ctx != nullptr);
  CHECK((mask & ncclProfileKernelCh) != 0);
  CHECK((mask & (ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch)) == 0);

  // A collective with one channel, through the v6 descriptor.
  ncclProfilerEventDescr_v6_t coll{};
  coll.type = ncclProfileColl;
  coll.rank = 0;
  coll.coll.seqNumber = 0;
  coll.coll.func = "AllReduce";
  coll.coll.datatype = "ncclFloat32";
  coll.coll.count = 1024;
  coll.coll.nChannels = 1;
  coll.coll.algo = "RING";
  coll.coll.proto = "SIMPLE";
  void* collHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &collHandle, &coll) == ncclSuccess);
  REQUIRE(collHandle != nullptr);
  ncclProfilerEventDescr_v6_t ch{};
  ch.type = ncclProfileKernelCh;
  ch.parentObj = collHandle;
  ch.kernelCh.channelId = 0;
  ch.kernelCh.pTimer = 1;
  void* chHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &chHandle, &ch) == ncclSuccess);
  CHECK(p->stopEvent(chHandle) == ncclSuccess);
  CHECK(p->stopEvent(collHandle) == ncclSuccess);

  // The copy-engine events of v6 are accepted and not tracked.
  ncclProfilerEventDescr_v6_t ce{};
  ce.type = ncclProfileCeColl;
  ce.ceColl.seqNumber = 0;
  ce.ceColl.func = "AllGather";
  ce.ceColl.count = 4096;
  void* ceHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &ceHandle, &ce) == ncclSuccess);
  ncclProfilerEventDescr_v6_t sync{};
  sync.type = ncclProfileCeSync;
  sync.parentObj = ceHandle;
  sync.ceCollSync.nRanks = 2;
  void* syncHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &syncHandle, &sync) == ncclSuccess);
  CHECK(p->stopEvent(syncHandle) == ncclSuccess);
  CHECK(p->stopEvent(ceHandle) == ncclSuccess);

  // The communicator table is written by the detector thread: read it until
  // it shows the completed collective (at most 5 s).
  resilient_blackbox_comm c{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    auto snap = blackbox::readRegion(region);
    REQUIRE(snap.ok());
    REQUIRE(snap->comms.size() == 1);
    c = snap->comms[0].comm;
    if (c.collEnqueued == 1 && c.inFlight == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < until);
  CHECK(c.abiVersion == 6);
  CHECK(c.collEnqueued == 1);
  CHECK(c.inFlight == 0);
  CHECK(c.droppedEvents == 0);
  CHECK(p->finalize(ctx) == ncclSuccess);
}

namespace {

// Reads the region until its one communicator shows `collectives` completed
// and nothing in flight (the detector thread writes the table; at most 5 s).
blackbox::CommView waitForCompleted(const std::string& region, uint64_t collectives) {
  blackbox::CommView view;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    auto snap = blackbox::readRegion(region);
    REQUIRE(snap.ok());
    REQUIRE(snap->comms.size() == 1);
    view = snap->comms[0];
    if (view.comm.collCompleted == collectives && view.comm.inFlight == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < until);
  return view;
}

}  // namespace

TEST_CASE(
    "ncclProfiler_v7 (NCCL 2.31+), from either library: kernel phases and the user tag reach "
    "the flight recorder",
    "[profiler][library][v7]") {
  const bool inNet = GENERATE(false, true);
  CAPTURE(inNet);
  TempDir dir;
  Environment env(dir.path().string());
  const std::string region = blackbox::regionPath(dir.path().string(), getpid());
  Library lib(inNet ? RESILIENT_NET_PLUGIN_PATH : RESILIENT_PROFILER_PLUGIN_PATH);
  REQUIRE(lib.loaded());
  const auto* p = lib.symbol<ncclProfiler_v7_t>("ncclProfiler_v7");
  REQUIRE(p != nullptr);
  CHECK(lib.symbol<ncclProfiler_v6_t>("ncclProfiler_v6") != nullptr);  // older NCCLs
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p->init(&ctx, 0x77, &mask, "v7", 1, 2, 0, quietLogger) == ncclSuccess);
  REQUIRE(ctx != nullptr);
  CHECK((mask & ncclProfileKernelCh) != 0);
  CHECK((mask & ncclProfileKernelPhase) != 0);

  ncclProfilerEventDescr_v7_t coll{};
  coll.type = ncclProfileColl;
  coll.coll.func = "AllReduce";
  coll.coll.datatype = "ncclFloat32";
  coll.coll.count = 1024;
  coll.coll.nChannels = 1;
  coll.coll.algo = "RING";
  coll.coll.proto = "";
  coll.coll.kernelVariant = "AllReduce_RSxLD_AGxST";
  coll.coll.isSymColl = true;
  coll.coll.userTag = 0xabc;
  void* collHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &collHandle, &coll) == ncclSuccess);
  REQUIRE(collHandle != nullptr);
  CHECK(p->stopEvent(collHandle) == ncclSuccess);
  ncclProfilerEventDescr_v7_t ch{};
  ch.type = ncclProfileKernelCh;
  ch.parentObj = collHandle;
  ch.kernelCh.pTimer = 1000;
  void* chHandle = nullptr;
  REQUIRE(p->startEvent(ctx, &chHandle, &ch) == ncclSuccess);
  REQUIRE(chHandle != nullptr);
  // NCCL's order: each phase started, its Stop state, stopped; then the channel.
  const uint64_t bounds[4] = {1000, 3500, 9000, 9400};
  for (uint8_t i = 0; i < 3; ++i) {
    ncclProfilerEventDescr_v7_t phase{};
    phase.type = ncclProfileKernelPhase;
    phase.parentObj = chHandle;
    phase.kernelPhase.phaseId = i;
    phase.kernelPhase.phaseName = i == 0 ? "initial_sync" : i == 1 ? "compute" : "final_sync";
    phase.kernelPhase.pTimer = bounds[i];
    void* phaseHandle = nullptr;
    REQUIRE(p->startEvent(ctx, &phaseHandle, &phase) == ncclSuccess);
    REQUIRE(phaseHandle != nullptr);
    ncclProfilerEventStateArgs_v7_t args{};
    args.kernelCh.pTimer = bounds[i + 1];
    CHECK(p->recordEventState(phaseHandle, ncclProfilerKernelPhaseStop, &args) == ncclSuccess);
    CHECK(p->stopEvent(phaseHandle) == ncclSuccess);
  }
  ncclProfilerEventStateArgs_v7_t stop{};
  stop.kernelCh.pTimer = 9400;
  CHECK(p->recordEventState(chHandle, ncclProfilerKernelChStop, &stop) == ncclSuccess);
  CHECK(p->stopEvent(chHandle) == ncclSuccess);

  const blackbox::CommView view = waitForCompleted(region, 1);
  CHECK(view.comm.abiVersion == 7);
  CHECK(view.comm.droppedEvents == 0);
  REQUIRE(view.flight.size() == 1);
  CHECK(view.flight[0].userTag == 0xabc);
  CHECK(view.flight[0].syncWaitNs == 2500);
  CHECK(view.flight[0].opFlags == RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC);
  CHECK(view.flight[0].gpuStopNs == 9400);
  CHECK(p->finalize(ctx) == ncclSuccess);
}

}  // namespace resilient::test
