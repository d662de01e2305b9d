// bench-profiler: what a profiler plugin costs NCCL per event, measured the
// way NCCL calls it (dlopen, dlsym("ncclProfiler_v5"), calls through the
// struct), for three plugins in the same run:
//   noop     a profiler that only hands back a constant handle (the floor)
//   resilient  libnccl-profiler-resilient.so (this project), as configured
//            by NCCL_RESILIENT_* (blackbox, hang detector thread running)
//   example  NCCL's ext-profiler/example built from NCCL's sources, if
//            RESILIENT_BENCH_EXAMPLE names it (bench/profiler/
//            build_nccl_example.sh builds it outside the repository). Its
//            collective event is 755 MB (proxy-step arrays for 32 channels x
//            32 ops x 1024 steps), and its default pool of 256 needs 193 GB
//            of address space: run it with NCCL_PROFILE_COLL_POOL_SIZE and
//            NCCL_PROFILE_P2P_POOL_SIZE small enough for the machine.
//
// Benchmarks, each single-threaded and with 2 threads (one communicator per
// thread, as with one proxy progress thread per communicator):
//   Pair        one proxy-step start/stop pair under a proxy op, the most
//               frequent event NCCL emits
//   Collective  the whole v5 event set of one collective in NCCL 2.28's order,
//               for our event mask (group API, coll API, group, coll, then per
//               channel 2 proxy ops, a kernel channel, proxy steps with their
//               states): 1 channel x 16 steps (178 events) and 4 channels x 4
//               steps (202 events); items = events
// NCCL 2.28.9's example profiler ignores the stop of a kernel-channel event
// on any channel but 0 (its kernelCh struct starts with a uint8_t type, its
// stopEvent reads a uint64_t): the operation is never released, its pools
// run dry after a pool's worth of collectives and it returns NULL for most
// events from then on (see the null_handles counter). With one channel it
// works.
// Counter null_handles: starts that returned NULL (a plugin dropping events
// would look cheaper than it is).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nccl/profiler_v5.h"

#ifndef RESILIENT_PROFILER_PLUGIN_PATH
#error "RESILIENT_PROFILER_PLUGIN_PATH must name libnccl-profiler-resilient.so"
#endif

namespace {

// --- the no-op profiler -----------------------------------------------------

char gNoopHandle;
ncclResult_t noopInit(void** ctx, uint64_t, int* mask, const char*, int, int, int,
                      ncclDebugLogger_t) {
  *ctx = &gNoopHandle;
  *mask = 0;
  return ncclSuccess;
}
ncclResult_t noopStart(void*, void** h, ncclProfilerEventDescr_v5_t*) {
  *h = &gNoopHandle;
  return ncclSuccess;
}
ncclResult_t noopStop(void*) {
  return ncclSuccess;
}
ncclResult_t noopRecord(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v5_t*) {
  return ncclSuccess;
}
ncclResult_t noopFinalize(void*) {
  return ncclSuccess;
}
const ncclProfiler_v5_t kNoop = {"noop", noopInit, noopStart, noopStop, noopRecord, noopFinalize};

void quietLogger(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

const ncclProfiler_v5_t* load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "bench-profiler: cannot load %s: %s\n", path, dlerror());
    return nullptr;
  }
  return static_cast<const ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
}

// --- NCCL's call sequences ----------------------------------------------------

class Comm {
 public:
  Comm(const ncclProfiler_v5_t* api, uint64_t commId) : api_(api) {
    int mask = 0;
    ok_ = api_->init(&ctx_, commId, &mask, "bench", 1, 2, 0, quietLogger) == ncclSuccess &&
          ctx_ != nullptr;
  }
  ~Comm() {
    if (ok_) {
      api_->finalize(ctx_);
    }
  }
  bool ok() const { return ok_; }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  void* start(uint64_t type, void* parent) {
    d_ = ncclProfilerEventDescr_v5_t{};
    d_.type = type;
    d_.parentObj = parent;
    return startCurrent();
  }
  void* startCurrent() {
    void* h = nullptr;
    api_->startEvent(ctx_, &h, &d_);
    nulls_ += h == nullptr ? 1 : 0;
    return h;
  }
  void stop(void* h) { api_->stopEvent(h); }
  void record(void* h, ncclProfilerEventState_t s, uint64_t timer = 0) {
    ncclProfilerEventStateArgs_v5_t a{};
    if (s == ncclProfilerKernelChStop) {
      a.kernelCh.pTimer = timer;
    } else {
      a.proxyStep.transSize = 65536;
    }
    // NCCL passes no arguments with the group API states.
    const bool groupApi = s == ncclProfilerGroupStartApiStop || s == ncclProfilerGroupEndApiStart;
    api_->recordEventState(h, s, groupApi ? nullptr : &a);
  }

  // The user-thread part of one collective, as NCCL 2.28.9 emits it for an
  // event mask without KernelLaunch (ours: Coll|P2p|ProxyOp|ProxyStep|KernelCh):
  // 10 events. Returns the Coll handle.
  void* enqueue(uint64_t seq, int nChannels) {
    void* groupApi = start(ncclProfileGroupApi, nullptr);
    record(groupApi, ncclProfilerGroupStartApiStop);
    d_ = ncclProfilerEventDescr_v5_t{};
    d_.type = ncclProfileCollApi;
    d_.parentObj = groupApi;
    d_.collApi.func = "AllReduce";
    d_.collApi.count = 1 << 20;
    d_.collApi.datatype = "ncclFloat32";
    void* collApi = startCurrent();
    record(groupApi, ncclProfilerGroupEndApiStart);
    void* group = start(ncclProfileGroup, nullptr);
    d_ = ncclProfilerEventDescr_v5_t{};
    d_.type = ncclProfileColl;
    d_.parentObj = collApi;
    d_.coll.seqNumber = seq;
    d_.coll.func = "AllReduce";
    d_.coll.count = 1 << 20;
    d_.coll.datatype = "ncclFloat32";
    d_.coll.nChannels = static_cast<uint8_t>(nChannels);
    d_.coll.nWarps = 16;
    d_.coll.algo = "RING";
    d_.coll.proto = "SIMPLE";
    d_.coll.parentGroup = group;
    void* coll = startCurrent();
    stop(coll);
    stop(group);
    stop(groupApi);
    stop(collApi);
    return coll;
  }

  void* proxyOp(void* coll, int channel, int isSend, int nSteps) {
    d_ = ncclProfilerEventDescr_v5_t{};
    d_.type = ncclProfileProxyOp;
    d_.parentObj = coll;
    d_.proxyOp.pid = pid_;
    d_.proxyOp.channelId = static_cast<uint8_t>(channel);
    d_.proxyOp.peer = 1;
    d_.proxyOp.nSteps = nSteps;
    d_.proxyOp.chunkSize = 131072;
    d_.proxyOp.isSend = isSend;
    return startCurrent();
  }

  void* step(void* proxyOp, int step) {
    d_ = ncclProfilerEventDescr_v5_t{};
    d_.type = ncclProfileProxyStep;
    d_.parentObj = proxyOp;
    d_.proxyStep.step = step;
    return startCurrent();
  }

  // Returns the number of events emitted.
  int collective(uint64_t seq, int nChannels, int nSteps) {
    int events = 10;
    void* coll = enqueue(seq, nChannels);
    void* send[64];
    void* recv[64];
    void* kernel[64];
    for (int ch = 0; ch < nChannels; ++ch) {
      send[ch] = proxyOp(coll, ch, 1, nSteps);
      recv[ch] = proxyOp(coll, ch, 0, nSteps);
      record(send[ch], ncclProfilerProxyOpInProgress_v4);
      d_ = ncclProfilerEventDescr_v5_t{};
      d_.type = ncclProfileKernelCh;
      d_.parentObj = coll;
      d_.kernelCh.channelId = static_cast<uint8_t>(ch);
      d_.kernelCh.pTimer = 1000 + seq;
      kernel[ch] = startCurrent();
      events += 4;
    }
    for (int s = 0; s < nSteps; ++s) {
      for (int ch = 0; ch < nChannels; ++ch) {
        void* st = step(send[ch], s);
        record(st, ncclProfilerProxyStepSendGPUWait);
        record(st, ncclProfilerProxyStepSendPeerWait_v4);
        record(st, ncclProfilerProxyStepSendWait);
        stop(st);
        void* rt = step(recv[ch], s);
        record(rt, ncclProfilerProxyStepRecvWait);
        record(rt, ncclProfilerProxyStepRecvFlushWait);
        record(rt, ncclProfilerProxyStepRecvGPUWait);
        stop(rt);
        events += 10;
      }
    }
    for (int ch = 0; ch < nChannels; ++ch) {
      record(kernel[ch], ncclProfilerKernelChStop, 2000 + seq);
      stop(kernel[ch]);
      stop(send[ch]);
      stop(recv[ch]);
      events += 4;
    }
    return events;
  }

  uint64_t nulls() const { return nulls_; }

 private:
  const ncclProfiler_v5_t* api_;
  void* ctx_ = nullptr;
  bool ok_ = false;
  ncclProfilerEventDescr_v5_t d_{};
  pid_t pid_ = getpid();
  uint64_t nulls_ = 0;
};

void pair(benchmark::State& state, const ncclProfiler_v5_t* api) {
  Comm comm(api, 0x1000 + static_cast<uint64_t>(state.thread_index()));
  if (!comm.ok()) {
    state.SkipWithError("the plugin's init failed");
    return;
  }
  void* coll = comm.enqueue(0, 1);
  void* op = comm.proxyOp(coll, 0, 1, 1 << 30);
  const uint64_t nullsBefore = comm.nulls();
  int s = 0;
  for (auto _ : state) {
    void* h = comm.step(op, s++);
    comm.stop(h);
    benchmark::DoNotOptimize(h);
  }
  state.counters["null_handles"] = static_cast<double>(comm.nulls() - nullsBefore);
  comm.stop(op);
}

void collective(benchmark::State& state, const ncclProfiler_v5_t* api) {
  Comm comm(api, 0x2000 + static_cast<uint64_t>(state.thread_index()));
  if (!comm.ok()) {
    state.SkipWithError("the plugin's init failed");
    return;
  }
  const int channels = static_cast<int>(state.range(0));
  const int steps = static_cast<int>(state.range(1));
  uint64_t seq = 0;
  int64_t events = 0;
  for (auto _ : state) {
    events += comm.collective(seq++, channels, steps);
  }
  state.SetItemsProcessed(events);
  state.counters["events_per_coll"] = benchmark::Counter(
      static_cast<double>(events) / static_cast<double>(seq), benchmark::Counter::kAvgThreads);
  state.counters["null_handles"] = static_cast<double>(comm.nulls());
}

void registerFor(const std::string& name, const ncclProfiler_v5_t* api) {
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("Pair/" + name).c_str(), pair, api)
        ->Threads(threads)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("Collective/" + name).c_str(), collective, api)
        ->ArgNames({"channels", "steps"})
        ->Args({1, 16})
        ->Args({4, 4})
        ->Threads(threads)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, const ncclProfiler_v5_t*>> plugins = {{"noop", &kNoop}};
  const char* ours = std::getenv("RESILIENT_BENCH_PLUGIN");
  if (const auto* api = load(ours != nullptr ? ours : RESILIENT_PROFILER_PLUGIN_PATH)) {
    plugins.emplace_back("resilient", api);
  } else {
    return 1;
  }
  if (const char* example = std::getenv("RESILIENT_BENCH_EXAMPLE")) {
    if (const auto* api = load(example)) {
      plugins.emplace_back("nccl_example", api);
    } else {
      return 1;
    }
  } else {
    std::fprintf(stderr,
                 "bench-profiler: RESILIENT_BENCH_EXAMPLE is not set: NCCL's example profiler "
                 "is not measured (bench/profiler/build_nccl_example.sh builds it)\n");
  }
  for (const auto& [name, api] : plugins) {
    registerFor(name, api);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
