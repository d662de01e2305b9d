#include <catch2/catch.hpp>

// The exported CollNet of libnccl-net-resilient.so, driven as NCCL drives
// it (src/plugin/net.cc ncclNetPluginInit, src/transport/coll_net.cc), over a
// fake inner library (libnccl-net-fake-coll-vN.so: a fake net plugin plus
// tests/support/fake_net/fake_collnet.cc). One process per ABI version and
// tag: the plugin reads its knobs once per process (COLLNET_TEST_VERSION,
// NCCL_RESILIENT_INNER set by meson). The ranks of a communicator are three
// CollNet comms of this process made from the same handles.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/signature.h"
#include "nccl/collnet_v10.h"
#include "nccl/collnet_v11.h"
#include "nccl/collnet_v12.h"
#include "nccl/collnet_v6.h"
#include "nccl/collnet_v7.h"
#include "nccl/collnet_v8.h"
#include "nccl/collnet_v9.h"
#include "nccl/net_v11.h"
#include "plugin/transport/external/external_collnet.h"
#include "plugin/transport/external/loader.h"
#include "tests/support/fake_net/fake_collnet.h"
#include "tests/support/mock_logger.h"

#ifndef RESILIENT_PLUGIN_PATH
#error "RESILIENT_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif

using namespace resilient;

namespace {

constexpr int kRanks = 3;
constexpr int kInt32 = 2;
constexpr int kFloat32 = 7;
constexpr int kSum = 0;
constexpr int kMax = 2;

int testVersion() {
  const char* v = std::getenv("COLLNET_TEST_VERSION");  // NOLINT(concurrency-mt-unsafe)
  return v != nullptr ? std::atoi(v) : 11;
}

// Our plugin with its net initialised for one communicator, and the fake
// inner library it loaded (kept loaded by this handle as well).
class Plugin {
 public:
  Plugin() {
    handle_ = dlopen(RESILIENT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle_ != nullptr);
    net_ = static_cast<ncclNet_v11_t*>(dlsym(handle_, "ncclNetPlugin_v11"));
    REQUIRE(net_ != nullptr);
    ncclNetCommConfig_v11_t config{-1};
    REQUIRE(net_->init(&netCtx_, 0xc011ec7, &config, test::CapturingLogger::function(), nullptr) ==
            ncclSuccess);
    const char* inner = std::getenv("NCCL_RESILIENT_INNER");  // NOLINT(concurrency-mt-unsafe)
    REQUIRE(inner != nullptr);
    fake_ = dlopen(inner, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    REQUIRE(fake_ != nullptr);
  }
  ~Plugin() {
    for (void* c : {netSend_, netRecv_}) {
      if (c != nullptr) {
        (void)(c == netSend_ ? net_->closeSend(c) : net_->closeRecv(c));
      }
    }
    if (netListen_ != nullptr) {
      (void)net_->closeListen(netListen_);
    }
    if (netCtx_ != nullptr) {
      (void)net_->finalize(netCtx_);
    }
    if (fake_ != nullptr) {
      dlclose(fake_);
    }
    dlclose(handle_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  template <class T>
  T* sym(void* lib, const char* name) const {
    return reinterpret_cast<T*>(dlsym(lib, name));
  }
  template <class T>
  T* ours(int v) const {
    return sym<T>(handle_, ("ncclCollNetPlugin_v" + std::to_string(v)).c_str());
  }
  template <class T>
  T* fakes(int v) const {
    return sym<T>(fake_, ("ncclCollNetPlugin_v" + std::to_string(v)).c_str());
  }
  FakeCollNetStats stats() const {
    FakeCollNetStats s{};
    sym<void(FakeCollNetStats*)>(fake_, "fakeCollNetStats")(&s);
    return s;
  }
  void reset() const { sym<void()>(fake_, "fakeCollNetReset")(); }
  // A net connection pair of the communicator whose send fails (the inner
  // plugin's isend returns an error): a fault of one of its connections.
  void failNetConnection() {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    REQUIRE(net_->listen(netCtx_, 0, handle, &netListen_) == ncclSuccess);
    for (int i = 0; i < 1000 && (netSend_ == nullptr || netRecv_ == nullptr); ++i) {
      ncclNetDeviceHandle_v11_t* none = nullptr;
      if (netSend_ == nullptr) {
        REQUIRE(net_->connect(netCtx_, 0, handle, &netSend_, &none) == ncclSuccess);
      }
      if (netRecv_ == nullptr) {
        REQUIRE(net_->accept(netListen_, &netRecv_, &none) == ncclSuccess);
      }
    }
    REQUIRE(netSend_ != nullptr);
    REQUIRE(netRecv_ != nullptr);
    sym<void(const char*, int)>(fake_, "fakeNetFailNext")("isend", ncclSystemError);
    char byte = 0;
    void* request = nullptr;
    CHECK(net_->isend(netSend_, &byte, 1, 0, nullptr, nullptr, &request) != ncclSuccess);
  }
  void failNext(const char* call, int result) const {
    sym<void(const char*, int)>(fake_, "fakeCollNetFailNext")(call, result);
  }
  void set(const char* knob, long value) const {
    REQUIRE(sym<int(const char*, long)>(fake_, "fakeCollNetSet")(knob, value) == 0);
  }

 private:
  void* handle_ = nullptr;
  void* fake_ = nullptr;
  ncclNet_v11_t* net_ = nullptr;
  void* netCtx_ = nullptr;
  void* netListen_ = nullptr;
  void* netSend_ = nullptr;
  void* netRecv_ = nullptr;
};

// NCCL's sequence for one communicator's CollNet: init (per communicator
// from v11, once before), listen per rank, connect with every rank's handle.
template <class T>
struct Communicator {
  T* t = nullptr;
  void* ctx = nullptr;
  char handles[kRanks][NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listens[kRanks] = {};
  void* comms[kRanks] = {};

  static constexpr bool kContexts = requires(T x) { x.finalize; };

  ncclResult_t init() {
    if constexpr (kContexts) {
      return t->init(&ctx, 0xc011ec7, test::CapturingLogger::function());
    } else {
      return t->init(test::CapturingLogger::function());
    }
  }
  void connectAll() {
    for (int r = 0; r < kRanks; ++r) {
      if constexpr (kContexts) {
        REQUIRE(t->listen(ctx, 0, handles[r], &listens[r]) == ncclSuccess);
      } else {
        REQUIRE(t->listen(0, handles[r], &listens[r]) == ncclSuccess);
      }
    }
    void* hs[kRanks] = {handles[0], handles[1], handles[2]};
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(t->connect(hs, kRanks, r, listens[r], &comms[r]) == ncclSuccess);
      REQUIRE(comms[r] != nullptr);
    }
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(t->closeListen(listens[r]) == ncclSuccess);  // as NCCL after connect
    }
  }
  void closeAll() {
    for (void*& c : comms) {
      if (c != nullptr) {
        CHECK(t->closeColl(c) == ncclSuccess);
        c = nullptr;
      }
    }
    if constexpr (kContexts) {
      CHECK(t->finalize(ctx) == ncclSuccess);
    }
  }
};

// How the WARN names the communicator: its hash from v11 (NCCL's collnet
// init passes it); before, NCCL's adapter inits once with no hash.
std::string commName(int v) {
  return v >= 11 ? "comm 0xc011ec7" : "comm 0x0";
}

// Calls f.template operator()<ncclCollNet_vN_t>() for the test's version.
template <class F>
void withVersion(int v, F&& f) {
  switch (v) {
    case 6: f.template operator()<ncclCollNet_v6_t>(); break;
    case 7: f.template operator()<ncclCollNet_v7_t>(); break;
    case 8: f.template operator()<ncclCollNet_v8_t>(); break;
    case 9: f.template operator()<ncclCollNet_v9_t>(); break;
    case 10: f.template operator()<ncclCollNet_v10_t>(); break;
    case 11: f.template operator()<ncclCollNet_v11_t>(); break;
    case 12: f.template operator()<ncclCollNet_v12_t>(); break;
    default: FAIL("unknown version " << v);
  }
}

// Waits until test() says done (or fails); the result of the last call.
template <class T>
ncclResult_t waitDone(T* t, void* request, int* size, int maxMs = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(maxMs);
  while (std::chrono::steady_clock::now() < deadline) {
    int done = 0;
    const ncclResult_t r = t->test(request, &done, size);
    if (r != ncclSuccess || done != 0) {
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return ncclInProgress;
}

// The type of a table member's parameter I (what it points at, for a pointer).
template <class Fn, size_t I>
using ParamOf = std::remove_pointer_t<typename Signature<Fn>::template Param<I>>;

template <class P>
void checkSameProperties(const P& ours, const P& fake) {
  CHECK(std::string(ours.name) == fake.name);
  CHECK(std::string(ours.pciPath) == fake.pciPath);
  CHECK(ours.guid == fake.guid);
  CHECK(ours.ptrSupport == fake.ptrSupport);  // DMA-BUF bit included, unchanged
  CHECK(ours.speed == fake.speed);
  CHECK(ours.port == fake.port);
  CHECK(ours.latency == fake.latency);
  CHECK(ours.maxComms == fake.maxComms);
  CHECK(ours.maxRecvs == fake.maxRecvs);
  if constexpr (requires { ours.netDeviceType; }) {
    CHECK(ours.netDeviceType == fake.netDeviceType);
    CHECK(ours.netDeviceVersion == fake.netDeviceVersion);
  }
  if constexpr (requires { ours.regIsGlobal; }) {
    CHECK(ours.regIsGlobal == fake.regIsGlobal);
  }
  if constexpr (requires { ours.vProps; }) {
    CHECK(ours.forceFlush == fake.forceFlush);
    CHECK(ours.vProps.ndevs == fake.vProps.ndevs);
    CHECK(ours.vProps.devs[0] == fake.vProps.devs[0]);
    CHECK(ours.maxP2pBytes == fake.maxP2pBytes);
    CHECK(ours.maxCollBytes == fake.maxCollBytes);
  }
  if constexpr (requires { ours.maxMultiRequestSize; }) {
    CHECK(ours.maxMultiRequestSize == fake.maxMultiRequestSize);
  }
  if constexpr (requires { ours.railId; }) {
    CHECK(ours.railId == fake.railId);
    CHECK(ours.planeId == fake.planeId);
  }
}

// Registers `size` bytes at `data` with rank r's comm; the fake's mhandle.
template <class T>
void* regMr(Communicator<T>& c, int r, void* data, size_t size, void** ourMh,
            const Plugin& plugin) {
  using Size = ParamOf<decltype(T::regMr), 2>;  // int in v6/v7
  REQUIRE(c.t->regMr(c.comms[r], data, static_cast<Size>(size), NCCL_PTR_HOST, ourMh) ==
          ncclSuccess);
  return plugin.stats().lastRegMh;
}

}  // namespace

TEST_CASE("the resilient library exports ncclCollNetPlugin_v6..v12", "[collnet][exports]") {
  void* lib = dlopen(RESILIENT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  for (int v = 6; v <= 12; ++v) {
    CAPTURE(v);
    const auto* head = static_cast<const ncclCollNet_v6_t*>(
        dlsym(lib, ("ncclCollNetPlugin_v" + std::to_string(v)).c_str()));
    REQUIRE(head != nullptr);
    CHECK(std::string(head->name) == "Resilient");
    CHECK(head->init != nullptr);  // NCCL reads name and init at dlsym time
  }
  dlclose(lib);
}

TEST_CASE("properties, devices, reduceSupport and optional members are the inner CollNet's",
          "[collnet][props]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const int v = testVersion();
  CAPTURE(v);
  const bool dmaBuf = GENERATE(false, true);
  CAPTURE(dmaBuf);
  Plugin plugin;
  plugin.reset();
  plugin.set("dmaBuf", dmaBuf ? 1 : 0);
  plugin.set("devices", 2);
  withVersion(v, [&]<class T>() {
    Communicator<T> comm;
    comm.t = plugin.ours<T>(v);
    T* fake = plugin.fakes<T>(v);
    REQUIRE(comm.t != nullptr);
    REQUIRE(fake != nullptr);
    REQUIRE(comm.init() == ncclSuccess);
    CHECK(plugin.stats().initCalls == 1);
    int ndev = 0;
    REQUIRE(comm.t->devices(&ndev) == ncclSuccess);
    CHECK(ndev == 2);
    using Props = ParamOf<decltype(T::getProperties), 1>;
    for (int dev = 0; dev < ndev; ++dev) {
      CAPTURE(dev);
      Props ours{};
      Props theirs{};
      REQUIRE(comm.t->getProperties(dev, &ours) == ncclSuccess);
      REQUIRE(fake->getProperties(dev, &theirs) == ncclSuccess);
      checkSameProperties(ours, theirs);
    }
    // Optional members: exactly where the inner CollNet has them.
    CHECK((comm.t->regMrDmaBuf != nullptr) == dmaBuf);
    CHECK((fake->regMrDmaBuf != nullptr) == dmaBuf);
    if constexpr (requires { comm.t->iallgather; }) {
      CHECK(comm.t->iallgather != nullptr);
      CHECK(comm.t->ireducescatter != nullptr);
    }
    if constexpr (requires { comm.t->makeVDevice; }) {
      REQUIRE(comm.t->makeVDevice != nullptr);
      using VProps = ParamOf<decltype(T::makeVDevice), 1>;
      VProps vp{};
      vp.ndevs = 2;
      vp.devs[0] = 0;
      vp.devs[1] = 1;
      int d = -1;
      REQUIRE(comm.t->makeVDevice(&d, &vp) == ncclSuccess);
      CHECK(d == 42);  // the fake's answer
      CHECK(plugin.stats().lastVDeviceNdevs == 2);
    }
    const int pairs[][2] = {{kInt32, kSum}, {kFloat32, kMax}, {9, kSum}, {kInt32, 1}};
    for (const auto& p : pairs) {
      int ourAnswer = -1;
      int theirAnswer = -2;
      REQUIRE(comm.t->reduceSupport(p[0], p[1], &ourAnswer) == ncclSuccess);
      REQUIRE(fake->reduceSupport(p[0], p[1], &theirAnswer) == ncclSuccess);
      CHECK(ourAnswer == theirAnswer);
    }
    if (dmaBuf) {
      comm.connectAll();
      void* mh = nullptr;
      char buf[64];
      REQUIRE(comm.t->regMrDmaBuf(comm.comms[0], buf, sizeof buf, NCCL_PTR_CUDA, 4096, 17, &mh) ==
              ncclSuccess);
      CHECK(plugin.stats().lastDmaBufFd == 17);
      CHECK(plugin.stats().lastDmaBufOffset == 4096);
      REQUIRE(comm.t->deregMr(comm.comms[0], mh) == ncclSuccess);
    }
    comm.closeAll();
    CHECK(plugin.stats().liveComms == 0);
    CHECK(plugin.stats().liveMhandles == 0);
  });
  CHECK(logger.count(NCCL_LOG_WARN) == 0);
}

TEST_CASE("collectives across three ranks give the inner CollNet's results and arguments",
          "[collnet][collectives]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const int v = testVersion();
  CAPTURE(v);
  Plugin plugin;
  plugin.reset();
  withVersion(v, [&]<class T>() {
    Communicator<T> c;
    c.t = plugin.ours<T>(v);
    REQUIRE(c.t != nullptr);  // before CollNet: no such symbol
    REQUIRE(c.init() == ncclSuccess);
    c.connectAll();
    CHECK(plugin.stats().lastNranks == kRanks);
    constexpr int kCount = 5;
    int32_t send[kRanks][kRanks * kCount];
    int32_t recv[kRanks][kRanks * kCount];
    void* sendMh[kRanks];
    void* recvMh[kRanks];
    void* fakeSendMh[kRanks];
    for (int r = 0; r < kRanks; ++r) {
      for (int i = 0; i < kRanks * kCount; ++i) {
        send[r][i] = (r + 1) * 100 + i;
      }
      std::memset(recv[r], 0, sizeof recv[r]);
      fakeSendMh[r] = regMr(c, r, send[r], sizeof send[r], &sendMh[r], plugin);
      regMr(c, r, recv[r], sizeof recv[r], &recvMh[r], plugin);
    }
    // AllReduce, int32 sum.
    void* req[kRanks] = {};
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(c.t->iallreduce(c.comms[r], send[r], recv[r], kCount, kInt32, kSum, sendMh[r],
                              recvMh[r], &req[r]) == ncclSuccess);
      REQUIRE(req[r] != nullptr);
      CHECK(plugin.stats().lastCount == static_cast<size_t>(kCount));
      CHECK(plugin.stats().lastDataType == kInt32);
      CHECK(plugin.stats().lastRedOp == kSum);
      CHECK(plugin.stats().lastSendMh == fakeSendMh[r]);  // the inner's own mhandle
    }
    for (int r = 0; r < kRanks; ++r) {
      int size = -1;
      REQUIRE(waitDone(c.t, req[r], &size) == ncclSuccess);
      CHECK(size == static_cast<int>(kCount * sizeof(int32_t)));  // the inner's size
      for (int i = 0; i < kCount; ++i) {
        CHECK(recv[r][i] == 600 + 3 * i);  // 100+200+300 + 3i
      }
    }
    if constexpr (requires { c.t->iallgather; }) {
      using Sge = ParamOf<decltype(T::iallgather), 3>;
      const size_t bytesPerRank = kCount * sizeof(int32_t);
      for (int r = 0; r < kRanks; ++r) {
        std::memset(recv[r], 0, sizeof recv[r]);
        Sge part{};
        part.mhandle = recvMh[r];
        part.address = recv[r];
        part.size = static_cast<decltype(part.size)>(kRanks * bytesPerRank);
        REQUIRE(c.t->iallgather(c.comms[r], send[r], 1, &part, bytesPerRank, 0,
                                kRanks * bytesPerRank, sendMh[r], &req[r]) == ncclSuccess);
        REQUIRE(req[r] != nullptr);
        CHECK(plugin.stats().lastNParts == 1);
        CHECK(plugin.stats().lastBytesPerRank == bytesPerRank);
        CHECK(plugin.stats().lastWindowBytes == kRanks * bytesPerRank);
        CHECK(plugin.stats().lastPartSize == kRanks * bytesPerRank);
      }
      for (int r = 0; r < kRanks; ++r) {
        REQUIRE(waitDone(c.t, req[r], nullptr) == ncclSuccess);
        for (int k = 0; k < kRanks; ++k) {
          for (int i = 0; i < kCount; ++i) {
            CHECK(recv[r][k * kCount + i] == (k + 1) * 100 + i);
          }
        }
      }
      // ReduceScatter, int32 max over the whole vector: rank r gets part r.
      for (int r = 0; r < kRanks; ++r) {
        std::memset(recv[r], 0, sizeof recv[r]);
        Sge part{};
        part.mhandle = sendMh[r];
        part.address = send[r];
        part.size = static_cast<decltype(part.size)>(kRanks * bytesPerRank);
        REQUIRE(c.t->ireducescatter(c.comms[r], 1, &part, recv[r], bytesPerRank, 0,
                                    kRanks * bytesPerRank, kInt32, kMax, recvMh[r],
                                    &req[r]) == ncclSuccess);
        REQUIRE(req[r] != nullptr);
        CHECK(plugin.stats().lastRedOp == kMax);
      }
      for (int r = 0; r < kRanks; ++r) {
        REQUIRE(waitDone(c.t, req[r], nullptr) == ncclSuccess);
        for (int i = 0; i < kCount; ++i) {
          CHECK(recv[r][i] == 300 + r * kCount + i);  // rank 2's values are the largest
        }
      }
    }
    // Ranks as threads: each posts its AllReduce (float max) and waits for
    // it, round after round, concurrently with the others.
    float fsend[kRanks][kCount];
    float frecv[kRanks][kCount];
    std::vector<std::thread> ranks;
    int failures[kRanks] = {};
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        for (int round = 0; round < 20; ++round) {
          for (int i = 0; i < kCount; ++i) {
            fsend[r][i] = static_cast<float>(r * 10 + i + round);
          }
          void* q = nullptr;
          if (c.t->iallreduce(c.comms[r], fsend[r], frecv[r], kCount, kFloat32, kMax, nullptr,
                              nullptr, &q) != ncclSuccess ||
              q == nullptr || waitDone(c.t, q, nullptr) != ncclSuccess) {
            ++failures[r];
            return;
          }
          for (int i = 0; i < kCount; ++i) {
            failures[r] += frecv[r][i] != static_cast<float>(20 + i + round) ? 1 : 0;
          }
        }
      });
    }
    for (std::thread& t : ranks) {
      t.join();
    }
    for (int r = 0; r < kRanks; ++r) {
      CAPTURE(r);
      CHECK(failures[r] == 0);
    }
    // A flush reaches the inner with its size.
    void* flush = nullptr;
    REQUIRE(c.t->iflush(c.comms[0], recv[0], 12, recvMh[0], &flush) == ncclSuccess);
    REQUIRE(flush != nullptr);
    CHECK(plugin.stats().lastFlushSize == 12);
    REQUIRE(waitDone(c.t, flush, nullptr) == ncclSuccess);
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(c.t->deregMr(c.comms[r], sendMh[r]) == ncclSuccess);
      REQUIRE(c.t->deregMr(c.comms[r], recvMh[r]) == ncclSuccess);
    }
    c.closeAll();
    const FakeCollNetStats s = plugin.stats();
    CHECK(s.liveComms == 0);
    CHECK(s.liveRequests == 0);
    CHECK(s.liveMhandles == 0);
  });
  CHECK(logger.count(NCCL_LOG_WARN) == 0);
}

TEST_CASE("an error of the inner CollNet is one explained WARN and a sticky error",
          "[collnet][errors]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const int v = testVersion();
  CAPTURE(v);
  Plugin plugin;
  plugin.reset();
  withVersion(v, [&]<class T>() {
    Communicator<T> c;
    c.t = plugin.ours<T>(v);
    REQUIRE(c.t != nullptr);  // before CollNet: no such symbol
    // A failed inner init: ours fails too, quietly (NCCL disables CollNet
    // and goes on, ncclNetPluginInit); a later init works.
    plugin.failNext("init", ncclSystemError);
    CHECK(c.init() != ncclSuccess);
    CHECK(logger.count(NCCL_LOG_WARN) == 0);
    REQUIRE(c.init() == ncclSuccess);
    c.connectAll();
    int32_t data[4] = {1, 2, 3, 4};
    void* req = nullptr;
    plugin.failNext("iallreduce", ncclSystemError);
    CHECK(c.t->iallreduce(c.comms[1], data, data, 4, kInt32, kSum, nullptr, nullptr, &req) ==
          ncclSystemError);
    CHECK(req == nullptr);
    REQUIRE(logger.count(NCCL_LOG_WARN, "CollNet connection") == 1);
    std::string text;
    for (const auto& m : logger.messages()) {
      if (m.level == NCCL_LOG_WARN) {
        text = m.text;
      }
    }
    CAPTURE(text);
    CHECK(text.find("iallreduce failed") != std::string::npos);
    CHECK(text.find(commName(v)) != std::string::npos);
    CHECK(text.find("rank 1/3") != std::string::npos);
    CHECK(text.find("ncclSystemError") != std::string::npos);
    CHECK(text.find("ncclCollNetPlugin_v" + std::to_string(v)) != std::string::npos);
    // Sticky: later calls on that comm fail at once, without reaching the inner.
    const int before = plugin.stats().iallreduceCalls;
    CHECK(c.t->iallreduce(c.comms[1], data, data, 4, kInt32, kSum, nullptr, nullptr, &req) ==
          ncclSystemError);
    void* flush = nullptr;
    CHECK(c.t->iflush(c.comms[1], data, 4, nullptr, &flush) == ncclSystemError);
    CHECK(plugin.stats().iallreduceCalls == before);
    CHECK(plugin.stats().iflushCalls == 0);
    CHECK(logger.count(NCCL_LOG_WARN, "CollNet connection") == 1);
    // The other ranks' comms are not affected.
    REQUIRE(c.t->iflush(c.comms[0], data, 4, nullptr, &flush) == ncclSuccess);
    REQUIRE(waitDone(c.t, flush, nullptr) == ncclSuccess);
    c.closeAll();
  });
}

TEST_CASE("a collective on which nothing completes fails as stuck", "[collnet][stall]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const int v = testVersion();
  CAPTURE(v);
  Plugin plugin;
  plugin.reset();
  withVersion(v, [&]<class T>() {
    Communicator<T> c;
    c.t = plugin.ours<T>(v);
    REQUIRE(c.t != nullptr);  // before CollNet: no such symbol
    REQUIRE(c.init() == ncclSuccess);
    c.connectAll();
    plugin.set("stall", 1);
    int32_t data[kRanks][4] = {};
    void* req[kRanks] = {};
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(c.t->iallreduce(c.comms[r], data[r], data[r], 4, kInt32, kSum, nullptr, nullptr,
                              &req[r]) == ncclSuccess);
    }
    // NCCL_RESILIENT_PROGRESS_TIMEOUT_MS=300 (meson): failed within seconds.
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t r = waitDone(c.t, req[0], nullptr, 10000);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    CAPTURE(ms);
    CHECK(r != ncclSuccess);
    CHECK(r != ncclInProgress);
    CHECK(ms >= 250);
    CHECK(logger.count(NCCL_LOG_WARN, "no bytes moved for") >= 1);
    CHECK(logger.count(NCCL_LOG_WARN, "CollNet connection of " + commName(v)) >= 1);
    c.closeAll();
  });
}

TEST_CASE("a collective of a communicator whose other connection failed fails with that cause",
          "[collnet][stall]") {
  // Without it the collective would wait for the progress timeout: a CollNet
  // comm has no peer of its own for the liveness channel to watch. From v11
  // its communicator is known (NCCL passes the hash to the CollNet's init);
  // before, every communicator reads as 0 and the collective waits as stuck.
  test::CapturingLogger logger(log::Level::kWarn);
  const int v = testVersion();
  CAPTURE(v);
  Plugin plugin;
  plugin.reset();
  withVersion(v, [&]<class T>() {
    Communicator<T> c;
    c.t = plugin.ours<T>(v);
    REQUIRE(c.t != nullptr);
    REQUIRE(c.init() == ncclSuccess);
    c.connectAll();
    plugin.set("stall", 1);
    int32_t data[kRanks][4] = {};
    void* req[kRanks] = {};
    for (int r = 0; r < kRanks; ++r) {
      REQUIRE(c.t->iallreduce(c.comms[r], data[r], data[r], 4, kInt32, kSum, nullptr, nullptr,
                              &req[r]) == ncclSuccess);
    }
    plugin.failNetConnection();
    // Every rank's CollNet comm fails: the failed send's cause, or stuck.
    for (int rank = 0; rank < kRanks; ++rank) {
      CAPTURE(rank);
      const ncclResult_t r = waitDone(c.t, req[rank], nullptr, 10000);
      CHECK(r != ncclSuccess);
      CHECK(r != ncclInProgress);
    }
    const std::string reason = "another connection of its communicator failed (send";
    CHECK(logger.count(NCCL_LOG_WARN, reason) == (v >= 11 ? kRanks : 0));
    CHECK(logger.count(NCCL_LOG_WARN, "no bytes moved for") == (v >= 11 ? 0 : kRanks));
    c.closeAll();
  });
}

TEST_CASE("an inner library without CollNet: our CollNet init fails quietly", "[collnet][none]") {
  test::CapturingLogger logger(log::Level::kWarn);
  Plugin plugin;  // NCCL_RESILIENT_INNER: a fake net plugin without CollNet
  for (int v = 6; v <= 12; ++v) {
    CAPTURE(v);
    withVersion(v, [&]<class T>() {
      Communicator<T> c;
      c.t = plugin.ours<T>(v);
      REQUIRE(c.t != nullptr);
      CHECK(c.init() != ncclSuccess);  // NCCL disables CollNet (ncclNetPluginInit)
      CHECK(c.ctx == nullptr);
    });
  }
  CHECK(logger.count(NCCL_LOG_WARN) == 0);
}

TEST_CASE("the loader finds the inner library's CollNet of its own version", "[collnet][loader]") {
  const char* inner = std::getenv("NCCL_RESILIENT_INNER");  // NOLINT(concurrency-mt-unsafe)
  REQUIRE(inner != nullptr);
  const int v = testVersion();
  CAPTURE(v);
  transport::external::LoadOptions load;
  load.spec = inner;
  auto loaded = transport::external::loadExternalPlugin(load);
  REQUIRE(loaded.ok());
  transport::CollNet* collNet = (*loaded)->collNet();
  REQUIRE(collNet != nullptr);
  CHECK(transport::external::collNetAbiVersion(*collNet) == v);
  CHECK(std::string(collNet->name()) == "FakeCollNet");
}

TEST_CASE("the loader gives no CollNet for a library without one", "[collnet][none]") {
  const char* inner = std::getenv("NCCL_RESILIENT_INNER");  // NOLINT(concurrency-mt-unsafe)
  REQUIRE(inner != nullptr);
  transport::external::LoadOptions load;
  load.spec = inner;
  auto loaded = transport::external::loadExternalPlugin(load);
  REQUIRE(loaded.ok());
  CHECK((*loaded)->collNet() == nullptr);
}
