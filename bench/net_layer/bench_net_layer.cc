// bench-net-layer: what the resilient layer adds to each data-path call, the
// way NCCL's proxy makes them (dlopen, dlsym("ncclNetPlugin_v11"), calls
// through the struct), for two plugins in the same run:
//   inner      an instant net plugin called directly: the test fake
//              (tests/support/fake_net/), built here as libnccl-net-bench-fake.so
//   resilient  libnccl-net-resilient.so wrapping that same library
//              (NCCL_RESILIENT_INNER=<its path>), with its defaults otherwise:
//              watchdog thread, liveness channel, blackbox
// The difference between the two is the layer's cost per call.
//
// Benchmarks (one connected send/recv pair per plugin, single-threaded):
//   Send  isend + test until done; the matching irecv is posted before and
//         completed after the timed part
//   Recv  irecv of `pieces` buffers (a grouped receive) + test until done;
//         the matching isends are posted before and completed after
//   Poll  one test of a send that cannot complete (no receive posted): what
//         each not-done test() of NCCL's polling costs
//   CollAllReduce  iallreduce + test until done on a CollNet communicator of
//         one rank (ncclCollNetPlugin_v11; the fake's collective of one rank
//         completes once posted)
// Send and Recv time only their part of each iteration (manual time). The
// fake copies the bytes once both sides are posted (inside the timed isend or
// irecv), so at bytes > 0 both plugins include a memcpy of that size; bytes =
// 0 gives the layer's cost without it (the layer never touches the data).
// Counters: tests (test calls per request); threads (of the process: the
// resilient plugin's watchdog is one; both pairs are set up before the first
// benchmark, so it runs during the inner ones too).
// RESILIENT_BENCH_PLUGIN and RESILIENT_BENCH_INNER replace the two paths;
// RESILIENT_BENCH_CONSUMED=1 gives the fake irecvConsumed (a device-unpack
// plugin's member, passed through by the layer) and every receive, in Recv
// timed, is then consumed as NCCL consumes it.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "nccl/collnet_v11.h"
#include "nccl/net_v11.h"

#ifndef RESILIENT_NET_PLUGIN_PATH
#error "RESILIENT_NET_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif
#ifndef RESILIENT_BENCH_FAKE_PATH
#error "RESILIENT_BENCH_FAKE_PATH must name the fake net plugin (v11)"
#endif

namespace {

constexpr size_t kMaxBytes = size_t{1} << 20;
constexpr int kMaxPieces = 8;

void warnLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) {
    return;
  }
  va_list args;
  va_start(args, fmt);
  std::fputs("bench-net-layer: plugin WARN: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
}

const ncclNet_v11_t* load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "bench-net-layer: cannot load %s: %s\n", path, dlerror());
    return nullptr;
  }
  return static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
}

int threadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d)) {
      n += e->d_name[0] != '.' ? 1 : 0;
    }
    closedir(d);
  }
  return n;
}

// One context and one connected send/recv pair of a plugin, with registered
// buffers, as NCCL's proxy sets them up.
class Pair {
 public:
  explicit Pair(const ncclNet_v11_t* net) : net_(net), send_(kMaxBytes), recv_(kMaxBytes) {
    ok_ = setUp();
  }
  ~Pair() {
    if (sendMh_ != nullptr) {
      net_->deregMr(sendComm_, sendMh_);
    }
    if (recvMh_ != nullptr) {
      net_->deregMr(recvComm_, recvMh_);
    }
    if (sendComm_ != nullptr) {
      net_->closeSend(sendComm_);
    }
    if (recvComm_ != nullptr) {
      net_->closeRecv(recvComm_);
    }
    if (listenComm_ != nullptr) {
      net_->closeListen(listenComm_);
    }
    if (ctx_ != nullptr) {
      net_->finalize(ctx_);
    }
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  bool ok() const { return ok_; }

  // isend (posting until the plugin takes it); false on an error.
  bool isend(size_t bytes, int tag, void** req) {
    do {
      if (net_->isend(sendComm_, send_.data(), bytes, tag, sendMh_, nullptr, req) != ncclSuccess) {
        return false;
      }
    } while (*req == nullptr);
    return true;
  }
  // One irecv of `pieces` buffers of bytes / pieces, tags 0..pieces-1.
  bool irecv(size_t bytes, int pieces, void** req) {
    void* data[kMaxPieces];
    size_t sizes[kMaxPieces];
    int tags[kMaxPieces];
    void* mhandles[kMaxPieces];
    for (int i = 0; i < pieces; ++i) {
      data[i] = recv_.data() + static_cast<size_t>(i) * (bytes / pieces);
      sizes[i] = bytes / pieces;
      tags[i] = i;
      mhandles[i] = recvMh_;
    }
    do {
      if (net_->irecv(recvComm_, pieces, data, sizes, tags, mhandles, nullptr, req) !=
          ncclSuccess) {
        return false;
      }
    } while (*req == nullptr);
    return true;
  }
  // test() until done; returns the number of calls, 0 on an error.
  int wait(void* req) {
    int done = 0;
    int sizes[kMaxPieces];
    int calls = 0;
    while (done == 0) {
      ++calls;
      if (net_->test(req, &done, sizes) != ncclSuccess) {
        return 0;
      }
    }
    return calls;
  }
  // A completed receive of `pieces`, consumed as NCCL does when the plugin
  // has irecvConsumed (src/transport/net.cc, recvProxyProgress); false on an
  // error.
  bool consume(void* req, int pieces) {
    return net_->irecvConsumed == nullptr ||
           net_->irecvConsumed(recvComm_, pieces, req) == ncclSuccess;
  }
  bool testOnce(void* req, int* done) {
    int sizes[kMaxPieces];
    return net_->test(req, done, sizes) == ncclSuccess;
  }

 private:
  bool setUp() {
    if (net_->init(&ctx_, 0x6e65746c61796572ull, nullptr, warnLogger, nullptr) != ncclSuccess) {
      return false;
    }
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    if (net_->listen(ctx_, 0, handle, &listenComm_) != ncclSuccess) {
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sendComm_ == nullptr || recvComm_ == nullptr) {
      ncclNetDeviceHandle_v11_t* dev = nullptr;
      if (sendComm_ == nullptr && net_->connect(ctx_, 0, handle, &sendComm_, &dev) != ncclSuccess) {
        return false;
      }
      if (recvComm_ == nullptr && net_->accept(listenComm_, &recvComm_, &dev) != ncclSuccess) {
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "bench-net-layer: %s: no connection after 10 s\n", net_->name);
        return false;
      }
    }
    return net_->regMr(sendComm_, send_.data(), send_.size(), NCCL_PTR_HOST, &sendMh_) ==
               ncclSuccess &&
           net_->regMr(recvComm_, recv_.data(), recv_.size(), NCCL_PTR_HOST, &recvMh_) ==
               ncclSuccess;
  }

  const ncclNet_v11_t* net_;
  std::vector<char> send_;
  std::vector<char> recv_;
  void* ctx_ = nullptr;
  void* listenComm_ = nullptr;
  void* sendComm_ = nullptr;
  void* recvComm_ = nullptr;
  void* sendMh_ = nullptr;
  void* recvMh_ = nullptr;
  bool ok_ = false;
};

// One communicator of one rank on a CollNet (the fake's collective of a
// single rank completes once posted), as NCCL's proxy sets it up: init,
// listen, connect with the one handle, closeListen.
class CollGroup {
 public:
  // NCCL's ncclInt32 and ncclSum (the CollNet ABI takes the enums as ints).
  static constexpr int kInt32 = 2;
  static constexpr int kSum = 0;

  explicit CollGroup(const ncclCollNet_v11_t* coll) : coll_(coll), data_(kMaxBytes) {
    ok_ = coll_ != nullptr && setUp();
  }
  ~CollGroup() {
    if (comm_ != nullptr) {
      coll_->closeColl(comm_);
    }
    if (ctx_ != nullptr) {
      coll_->finalize(ctx_);
    }
  }
  CollGroup(const CollGroup&) = delete;
  CollGroup& operator=(const CollGroup&) = delete;
  bool ok() const { return ok_; }

  // iallreduce of `bytes` of int32 sums in place (posting until the plugin
  // takes it); false on an error.
  bool iallreduce(size_t bytes, void** req) {
    do {
      if (coll_->iallreduce(comm_, data_.data(), data_.data(), bytes / sizeof(int32_t),
                            kInt32, kSum, nullptr, nullptr, req) != ncclSuccess) {
        return false;
      }
    } while (*req == nullptr);
    return true;
  }
  // test() until done; the number of calls, 0 on an error.
  int wait(void* req) {
    int done = 0;
    int size = 0;
    int calls = 0;
    while (done == 0) {
      ++calls;
      if (coll_->test(req, &done, &size) != ncclSuccess) {
        return 0;
      }
    }
    return calls;
  }

 private:
  bool setUp() {
    if (coll_->init(&ctx_, 0x636f6c6c6e6574ull, warnLogger) != ncclSuccess) {
      return false;
    }
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen = nullptr;
    if (coll_->listen(ctx_, 0, handle, &listen) != ncclSuccess) {
      return false;
    }
    void* handles[1] = {handle};
    const bool connected = coll_->connect(handles, 1, 0, listen, &comm_) == ncclSuccess;
    coll_->closeListen(listen);
    return connected && comm_ != nullptr;
  }

  const ncclCollNet_v11_t* coll_;
  std::vector<char> data_;
  void* ctx_ = nullptr;
  void* comm_ = nullptr;
  bool ok_ = false;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What every request benchmark reports besides its time: bytes, test()
// calls per request and the process's threads (the watchdog included).
void reportCounters(benchmark::State& state, size_t bytes, int64_t tests) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["tests"] =
      benchmark::Counter(static_cast<double>(tests), benchmark::Counter::kAvgIterations);
  state.counters["threads"] = threadCount();
}

void sendBench(benchmark::State& state, Pair* pair) {
  const auto bytes = static_cast<size_t>(state.range(0));
  int64_t tests = 0;
  for (auto _ : state) {
    void* recv = nullptr;
    void* send = nullptr;
    if (!pair->irecv(bytes, 1, &recv)) {
      state.SkipWithError("irecv failed");
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const int calls = pair->isend(bytes, 0, &send) ? pair->wait(send) : 0;
    state.SetIterationTime(secondsSince(start));
    if (calls == 0 || pair->wait(recv) == 0) {
      state.SkipWithError("isend or test failed");
      break;
    }
    if (!pair->consume(recv, 1)) {
      state.SkipWithError("irecvConsumed failed");
      break;
    }
    tests += calls;
  }
  reportCounters(state, bytes, tests);
}

void recvBench(benchmark::State& state, Pair* pair) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const int pieces = static_cast<int>(state.range(1));
  int64_t tests = 0;
  for (auto _ : state) {
    void* sends[kMaxPieces];
    void* recv = nullptr;
    bool ok = true;
    for (int i = 0; i < pieces && ok; ++i) {
      ok = pair->isend(bytes / pieces, i, &sends[i]);
    }
    if (!ok) {
      state.SkipWithError("isend failed");
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const int calls = pair->irecv(bytes, pieces, &recv) ? pair->wait(recv) : 0;
    const bool consumed = calls != 0 && pair->consume(recv, pieces);
    state.SetIterationTime(secondsSince(start));
    for (int i = 0; i < pieces && ok; ++i) {
      ok = pair->wait(sends[i]) != 0;
    }
    if (calls == 0 || !consumed || !ok) {
      state.SkipWithError("irecv, test or irecvConsumed failed");
      break;
    }
    tests += calls;
  }
  reportCounters(state, bytes, tests);
}

void pollBench(benchmark::State& state, Pair* pair) {
  void* send = nullptr;
  void* recv = nullptr;
  if (!pair->isend(0, 0, &send)) {
    state.SkipWithError("isend failed");
    return;
  }
  int done = 0;
  for (auto _ : state) {
    if (!pair->testOnce(send, &done) || done != 0) {
      state.SkipWithError("test failed, or completed a send without a receive");
      break;
    }
  }
  if (!pair->irecv(0, 1, &recv) || pair->wait(send) == 0 || pair->wait(recv) == 0 ||
      !pair->consume(recv, 1)) {
    state.SkipWithError("cannot complete the pending send");
  }
  state.counters["threads"] = threadCount();
}

void collBench(benchmark::State& state, CollGroup* group) {
  const auto bytes = static_cast<size_t>(state.range(0));
  int64_t tests = 0;
  for (auto _ : state) {
    void* req = nullptr;
    const auto start = std::chrono::steady_clock::now();
    const int calls = group->iallreduce(bytes, &req) ? group->wait(req) : 0;
    state.SetIterationTime(secondsSince(start));
    if (calls == 0) {
      state.SkipWithError("iallreduce or test failed");
      break;
    }
    tests += calls;
  }
  reportCounters(state, bytes, tests);
}

// Each benchmark for both plugins one after the other, so that a busy moment
// of the machine hits both alike (with repetitions, also pass
// --benchmark_enable_random_interleaving=true).
void registerAll(const std::vector<std::pair<std::string, Pair*>>& pairs,
                 const std::vector<std::pair<std::string, CollGroup*>>& groups) {
  for (const auto& [name, pair] : pairs) {
    benchmark::RegisterBenchmark(("Send/" + name).c_str(), sendBench, pair)
        ->ArgName("bytes")
        ->Arg(0)
        ->Arg(128 << 10)
        ->Arg(512 << 10)
        ->Arg(1 << 20)
        ->UseManualTime();
  }
  for (const auto& [name, pair] : pairs) {
    benchmark::RegisterBenchmark(("Recv/" + name).c_str(), recvBench, pair)
        ->ArgNames({"bytes", "pieces"})
        ->ArgsProduct({{0, 512 << 10, 1 << 20}, {1, 4}})
        ->UseManualTime();
  }
  for (const auto& [name, pair] : pairs) {
    benchmark::RegisterBenchmark(("Poll/" + name).c_str(), pollBench, pair);
  }
  for (const auto& [name, group] : groups) {
    benchmark::RegisterBenchmark(("CollAllReduce/" + name).c_str(), collBench, group)
        ->ArgName("bytes")
        ->Arg(0)
        ->Arg(4096)
        ->UseManualTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* fake = std::getenv("RESILIENT_BENCH_INNER");
  fake = fake != nullptr ? fake : RESILIENT_BENCH_FAKE_PATH;
  const char* ours = std::getenv("RESILIENT_BENCH_PLUGIN");
  ours = ours != nullptr ? ours : RESILIENT_NET_PLUGIN_PATH;
  // Read by the resilient plugin's first init; everything else stays default.
  setenv("NCCL_RESILIENT_INNER", fake, 1);  // NOLINT(concurrency-mt-unsafe): no thread yet
  const ncclNet_v11_t* inner = load(fake);
  const ncclNet_v11_t* resilient = load(ours);
  if (inner == nullptr || resilient == nullptr) {
    return 1;
  }
  // RESILIENT_BENCH_CONSUMED=1: the fake gets irecvConsumed (a device-unpack
  // plugin's member), which the resilient plugin then offers too, and every
  // receive is consumed after its test said done: the cost of that path.
  if (const char* consumed = std::getenv("RESILIENT_BENCH_CONSUMED");
      consumed != nullptr && std::strcmp(consumed, "1") == 0) {
    auto set = reinterpret_cast<int (*)(const char*, long)>(
        dlsym(dlopen(fake, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), "fakeNetSet"));
    if (set == nullptr || set("irecvConsumed", 1) != 0) {
      std::fprintf(stderr, "bench-net-layer: %s has no irecvConsumed knob\n", fake);
      return 1;
    }
  }
  {
    Pair innerPair(inner);
    Pair resilientPair(resilient);
    if (!innerPair.ok() || !resilientPair.ok()) {
      std::fprintf(stderr, "bench-net-layer: cannot set up a connection (%s)\n",
                   innerPair.ok() ? "resilient" : "inner");
      return 1;
    }
    // The CollNet of the same two libraries (the resilient one's finds the
    // core its net init made, as under NCCL).
    CollGroup innerGroup(static_cast<const ncclCollNet_v11_t*>(
        dlsym(dlopen(fake, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), "ncclCollNetPlugin_v11")));
    CollGroup resilientGroup(static_cast<const ncclCollNet_v11_t*>(
        dlsym(dlopen(ours, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), "ncclCollNetPlugin_v11")));
    if (!innerGroup.ok() || !resilientGroup.ok()) {
      std::fprintf(stderr, "bench-net-layer: cannot set up a CollNet communicator (%s)\n",
                   innerGroup.ok() ? "resilient" : "inner");
      return 1;
    }
    registerAll({{"inner", &innerPair}, {"resilient", &resilientPair}},
                {{"inner", &innerGroup}, {"resilient", &resilientGroup}});
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  }
  return 0;
}
