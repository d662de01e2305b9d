// Issue 33, "every capability of the wrapped plugin passes through":
// libnccl-net-resilient.so over a fake inner plugin (NCCL_RESILIENT_INNER =
// libnccl-net-fake-v<N>.so), both driven through their raw ncclNetPlugin_v<N>
// tables as NCCL drives them, at every ABI version 6..12. What NCCL sees of
// the wrapper must be what it would see of the inner plugin alone: the same
// devices and properties, the same optional members, each call reaching the
// inner plugin with the caller's arguments and its answer coming back, and
// faults on those paths still detected and explained.
//
// Our library reads its environment once per load, so each case loads it
// afresh; the fake is also dlopen'ed here by the same path, which gives the
// handle our library's loader gets (one state: fakeNetReset between cases).
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"
#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "tests/support/fake_net/fake_net.h"
#include "tests/support/mock_logger.h"

#ifndef RESILIENT_PLUGIN_PATH
#error "RESILIENT_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif
#ifndef RESILIENT_FAKE_NET_DIR
#error "RESILIENT_FAKE_NET_DIR must name the directory of the fake net plugins"
#endif

using namespace resilient;

namespace {

constexpr uint64_t kCommId = 0xc0ffee;
constexpr int kFirstVersion = 6;
constexpr int kLastVersion = 12;

template <int N>
struct Abi;
template <>
struct Abi<6> {
  using Net = ncclNet_v6_t;
  using Props = ncclNetProperties_v6_t;
};
template <>
struct Abi<7> {
  using Net = ncclNet_v7_t;
  using Props = ncclNetProperties_v7_t;
};
template <>
struct Abi<8> {
  using Net = ncclNet_v8_t;
  using Props = ncclNetProperties_v8_t;
};
template <>
struct Abi<9> {
  using Net = ncclNet_v9_t;
  using Props = ncclNetProperties_v9_t;
};
template <>
struct Abi<10> {
  using Net = ncclNet_v10_t;
  using Props = ncclNetProperties_v10_t;
};
template <>
struct Abi<11> {
  using Net = ncclNet_v11_t;
  using Props = ncclNetProperties_v11_t;
};
template <>
struct Abi<12> {
  using Net = ncclNet_v12_t;
  using Props = ncclNetProperties_v12_t;
};

// Runs fn(std::integral_constant<int, version>): the version as a type, so
// that each version's table is called with its own signatures. Min: the
// first version fn is written for (only those are instantiated).
template <int Min, class Fn>
void withAbi(int version, Fn&& fn) {
  bool ran = false;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((version == Min + I ? (fn(std::integral_constant<int, Min + I>{}), ran = true) : false), ...);
  }
  (std::make_integer_sequence<int, kLastVersion - Min + 1>{});
  REQUIRE(ran);
}

using Knobs = std::vector<std::pair<std::string, long>>;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string fakePath(int version) {
  std::string path = RESILIENT_FAKE_NET_DIR;
  path.append("/libnccl-net-fake-v").append(std::to_string(version)).append(".so");
  return path;
}

// The fake inner plugin of one version, loaded directly.
class Fake {
 public:
  explicit Fake(int version)
      : version_(version),
        path_(fakePath(version)),
        lib_(dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    INFO(path_);
    REQUIRE(lib_ != nullptr);
  }
  ~Fake() { dlclose(lib_); }
  Fake(const Fake&) = delete;
  Fake& operator=(const Fake&) = delete;

  // A fresh state with these knobs (before any init: they shape the table).
  void configure(const Knobs& knobs) {
    fn<FakeNetResetFn>("fakeNetReset")();
    for (const auto& [knob, value] : knobs) {
      INFO(knob);
      REQUIRE(fn<FakeNetSetFn>("fakeNetSet")(knob.c_str(), value) == 0);
    }
  }
  void failNext(const char* call, int result) {
    fn<FakeNetFailNextFn>("fakeNetFailNext")(call, result);
  }
  FakeNetStats stats() const {
    FakeNetStats out{};
    fn<FakeNetStatsFn>("fakeNetStats")(&out);
    return out;
  }
  template <class Net>
  Net* table() const {
    return static_cast<Net*>(dlsym(lib_, ("ncclNetPlugin_v" + std::to_string(version_)).c_str()));
  }
  const std::string& path() const { return path_; }

 private:
  template <class F>
  F fn(const char* name) const {
    auto* f = reinterpret_cast<F>(dlsym(lib_, name));
    REQUIRE(f != nullptr);
    return f;
  }
  int version_;
  std::string path_;
  void* lib_;
};

// One load of our library over `fake`, at ABI version N, initialised as NCCL
// initialises a communicator (the logger captures our WARNs).
template <int N>
class Ours {
 public:
  using Net = typename Abi<N>::Net;

  Ours(const Fake& fake, Env env) : env_(std::move(env)) {
    env_.emplace_back("NCCL_RESILIENT_INNER", fake.path());
    env_.emplace_back("NCCL_RESILIENT_SOCKET_IFNAME", "lo");
    for (const auto& [k, v] : env_) {
      setenv(k.c_str(), v.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): test setup, one thread
    }
    lib_ = dlopen(RESILIENT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib_ != nullptr);
    net = static_cast<Net*>(dlsym(lib_, ("ncclNetPlugin_v" + std::to_string(N)).c_str()));
    REQUIRE(net != nullptr);
    const ncclDebugLogger_t logger = test::CapturingLogger::function();
    if constexpr (N >= 11) {
      ncclNetCommConfig_v11_t config{-1};
      REQUIRE(net->init(&ctx, kCommId, &config, logger, nullptr) == ncclSuccess);
    } else if constexpr (N == 10) {
      REQUIRE(net->init(logger, nullptr) == ncclSuccess);
    } else {
      REQUIRE(net->init(logger) == ncclSuccess);
    }
  }
  ~Ours() {
    if constexpr (N >= 11) {
      (void)net->finalize(ctx);
    }
    dlclose(lib_);
    for (const auto& [k, v] : env_) {
      unsetenv(k.c_str());  // NOLINT(concurrency-mt-unsafe)
    }
  }
  Ours(const Ours&) = delete;
  Ours& operator=(const Ours&) = delete;

  Net* net = nullptr;
  void* ctx = nullptr;  // v11+: the context init returned

 private:
  Env env_;
  void* lib_ = nullptr;
};

// ---- the calls whose shape depends on the version -------------------------

template <int N, class Net>
ncclResult_t listenOn(Net* net, void* ctx, int dev, void* handle, void** listenComm) {
  if constexpr (N >= 11) {
    return net->listen(ctx, dev, handle, listenComm);
  } else {
    (void)ctx;
    return net->listen(dev, handle, listenComm);
  }
}

// devComm: the device-handle out-pointer, as NCCL passes it (v7+).
template <int N, class Net>
ncclResult_t connectOn(Net* net, void* ctx, int dev, void* handle, void** sendComm,
                       ncclNetDeviceHandle_v7_t** devComm) {
  if constexpr (N >= 11) {
    return net->connect(ctx, dev, handle, sendComm, devComm);
  } else if constexpr (N == 10) {
    ncclNetCommConfig_v10_t config{-1};
    return net->connect(dev, &config, handle, sendComm, devComm);
  } else if constexpr (N >= 7) {
    return net->connect(dev, handle, sendComm, devComm);
  } else {
    (void)devComm;
    return net->connect(dev, handle, sendComm);
  }
}

template <int N, class Net>
ncclResult_t acceptOn(Net* net, void* listenComm, void** recvComm,
                      ncclNetDeviceHandle_v7_t** devComm) {
  if constexpr (N >= 7) {
    return net->accept(listenComm, recvComm, devComm);
  } else {
    (void)devComm;
    return net->accept(listenComm, recvComm);
  }
}

template <int N, class Net>
ncclResult_t regMrOn(Net* net, void* comm, void* data, size_t size, void** mhandle) {
  if constexpr (N <= 7) {
    return net->regMr(comm, data, static_cast<int>(size), NCCL_PTR_HOST, mhandle);
  } else {
    return net->regMr(comm, data, size, NCCL_PTR_HOST, mhandle);
  }
}

template <int N, class Net>
ncclResult_t isendOn(Net* net, void* sendComm, void* data, size_t size, void* mhandle,
                     void** request) {
  if constexpr (N >= 10) {
    return net->isend(sendComm, data, size, 0, mhandle, nullptr, request);
  } else if constexpr (N == 9) {
    return net->isend(sendComm, data, size, 0, mhandle, request);
  } else {
    return net->isend(sendComm, data, static_cast<int>(size), 0, mhandle, request);
  }
}

template <int N, class Net>
ncclResult_t irecvOn(Net* net, void* recvComm, void* data, size_t size, void* mhandle,
                     void** request) {
  void* datas[1] = {data};
  int tags[1] = {0};
  void* mhandles[1] = {mhandle};
  if constexpr (N >= 9) {
    size_t sizes[1] = {size};
    if constexpr (N >= 10) {
      return net->irecv(recvComm, 1, datas, sizes, tags, mhandles, nullptr, request);
    } else {
      return net->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    }
  } else {
    int sizes[1] = {static_cast<int>(size)};
    return net->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
  }
}

// Tests `request` until done, an error, or timeoutMs.
template <class Net>
ncclResult_t testUntilDone(Net* net, void* request, int timeoutMs = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  int done = 0;
  while (done == 0) {
    int size = 0;
    if (ncclResult_t r = net->test(request, &done, &size); r != ncclSuccess) {
      return r;
    }
    if (done == 0 && std::chrono::steady_clock::now() > deadline) {
      return ncclInternalError;  // reads as "not done in time"
    }
  }
  return ncclSuccess;
}

// A connection through one table: listen, then connect and accept polled
// in turn as NCCL's proxy does. The device-handle out-pointers are pointers
// to NULL unless given (v6 has none).
template <int N, class Net>
struct Connection {
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;

  void open(Net* net, void* ctx, int dev, ncclNetDeviceHandle_v7_t** sendDev,
            ncclNetDeviceHandle_v7_t** recvDev) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    REQUIRE(listenOn<N>(net, ctx, dev, handle, &listenComm) == ncclSuccess);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sendComm == nullptr || recvComm == nullptr) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      if (sendComm == nullptr) {
        REQUIRE(connectOn<N>(net, ctx, dev, handle, &sendComm, sendDev) == ncclSuccess);
      }
      if (recvComm == nullptr) {
        REQUIRE(acceptOn<N>(net, listenComm, &recvComm, recvDev) == ncclSuccess);
      }
    }
  }
  void close(Net* net) {
    CHECK(net->closeSend(sendComm) == ncclSuccess);
    CHECK(net->closeRecv(recvComm) == ncclSuccess);
    CHECK(net->closeListen(listenComm) == ncclSuccess);
  }
};

// ---- (a) properties, field by field ---------------------------------------

std::string text(const char* s) {
  return s != nullptr ? std::string(s) : std::string("(null)");
}

template <class Props>
void checkSameProperties(const Props& ours, const Props& inner) {
  CHECK(text(ours.name) == text(inner.name));
  CHECK(text(ours.pciPath) == text(inner.pciPath));
  CHECK(ours.guid == inner.guid);
  CHECK(ours.ptrSupport == inner.ptrSupport);
  CHECK(ours.speed == inner.speed);
  CHECK(ours.port == inner.port);
  CHECK(ours.latency == inner.latency);
  CHECK(ours.maxComms == inner.maxComms);
  CHECK(ours.maxRecvs == inner.maxRecvs);
  if constexpr (requires { ours.netDeviceType; }) {  // v7+
    CHECK(ours.netDeviceType == inner.netDeviceType);
    CHECK(ours.netDeviceVersion == inner.netDeviceVersion);
  }
  if constexpr (requires { ours.regIsGlobal; }) {  // v8+
    CHECK(ours.regIsGlobal == inner.regIsGlobal);
  }
  if constexpr (requires { ours.vProps; }) {  // v9+
    CHECK(ours.forceFlush == inner.forceFlush);
    REQUIRE(ours.vProps.ndevs == inner.vProps.ndevs);
    for (int i = 0; i < ours.vProps.ndevs; ++i) {
      CHECK(ours.vProps.devs[i] == inner.vProps.devs[i]);
    }
    CHECK(ours.maxP2pBytes == inner.maxP2pBytes);
    CHECK(ours.maxCollBytes == inner.maxCollBytes);
  }
  if constexpr (requires { ours.maxMultiRequestSize; }) {  // v11+
    CHECK(ours.maxMultiRequestSize == inner.maxMultiRequestSize);
  }
  if constexpr (requires { ours.railId; }) {  // v12
    CHECK(ours.railId == inner.railId);
    CHECK(ours.planeId == inner.planeId);
  }
}

// devices() and every device's properties, ours against the inner table's.
template <int N>
void checkSameDevices(typename Abi<N>::Net* ours, typename Abi<N>::Net* inner) {
  int ourCount = -1;
  int innerCount = -2;
  REQUIRE(ours->devices(&ourCount) == ncclSuccess);
  REQUIRE(inner->devices(&innerCount) == ncclSuccess);
  REQUIRE(ourCount == innerCount);
  for (int dev = 0; dev < ourCount; ++dev) {
    CAPTURE(dev);
    typename Abi<N>::Props mine{};
    typename Abi<N>::Props theirs{};
    REQUIRE(ours->getProperties(dev, &mine) == ncclSuccess);
    REQUIRE(inner->getProperties(dev, &theirs) == ncclSuccess);
    checkSameProperties(mine, theirs);
  }
}

// ---- (b) the optional members ---------------------------------------------

// Each optional member the version has: in our table exactly when it is in
// the inner plugin's (both read after init, as NCCL reads them).
template <class Net>
void checkSameMembers(const Net& ours, const Net& inner) {
  const auto offered = [](auto member) { return member != nullptr; };
  CHECK(offered(ours.regMrDmaBuf) == offered(inner.regMrDmaBuf));
  if constexpr (requires { ours.getDeviceMr; }) {  // v7+
    CHECK(offered(ours.getDeviceMr) == offered(inner.getDeviceMr));
    CHECK(offered(ours.irecvConsumed) == offered(inner.irecvConsumed));
  }
  if constexpr (requires { ours.makeVDevice; }) {  // v9+
    CHECK(offered(ours.makeVDevice) == offered(inner.makeVDevice));
  }
  if constexpr (requires { ours.setNetAttr; }) {  // v11+
    CHECK(offered(ours.setNetAttr) == offered(inner.setNetAttr));
  }
}

// The knobs of one capability, and the first version that has it.
struct Capability {
  const char* name;
  int since;
  Knobs knobs;
};

const std::vector<Capability>& capabilities() {
  static const std::vector<Capability> all{
      {"none", 6, {}},
      {"dmabuf", 6, {{"dmabuf", 1}}},
      {"ports", 6, {{"ports", 3}}},
      {"fusion", 9, {{"ports", 3}, {"fusion", 1}}},
      {"offload",
       7,
       {{"deviceType", NCCL_NET_DEVICE_UNPACK},
        {"deviceHandle", 1},
        {"getDeviceMr", 1},
        {"irecvConsumed", 1}}},
      {"getDeviceMr", 7, {{"getDeviceMr", 1}}},
      {"irecvConsumed", 7, {{"irecvConsumed", 1}}},
      {"netAttr", 11, {{"netAttr", 1}}},
      {"all",
       11,
       {{"dmabuf", 1},
        {"ports", 3},
        {"fusion", 1},
        {"getDeviceMr", 1},
        {"irecvConsumed", 1},
        {"netAttr", 1}}},
  };
  return all;
}

}  // namespace

TEST_CASE("devices, properties and optional members of the inner plugin pass through, per knob",
          "[plugin][passthrough]") {
  const int version = GENERATE(range(kFirstVersion, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<6>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    using Net = typename Abi<N>::Net;
    for (const Capability& cap : capabilities()) {
      if (version < cap.since) {
        continue;
      }
      CAPTURE(cap.name);
      fake.configure(cap.knobs);
      test::CapturingLogger logger(log::Level::kWarn);
      Ours<N> ours(fake, {});
      Net* inner = fake.table<Net>();
      REQUIRE(inner != nullptr);
      checkSameMembers(*ours.net, *inner);
      checkSameDevices<N>(ours.net, inner);
      if constexpr (N >= 9) {
        if (inner->makeVDevice != nullptr) {
          // A virtual device made through us: counted and described alike.
          decltype(typename Abi<N>::Props{}.vProps) v{};
          v.ndevs = 2;
          v.devs[0] = 0;
          v.devs[1] = 2;
          int d = -1;
          CHECK(ours.net->makeVDevice != nullptr);
          if (ours.net->makeVDevice != nullptr) {
            REQUIRE(ours.net->makeVDevice(&d, &v) == ncclSuccess);
            CHECK(d == 3);
            checkSameDevices<N>(ours.net, inner);
          }
        }
      }
      CHECK(logger.count(NCCL_LOG_WARN) == 0);
    }
  });
}

TEST_CASE("regMrDmaBuf reaches the inner plugin with the caller's fd, offset, size and type",
          "[plugin][passthrough][dmabuf]") {
  const int version = GENERATE(range(kFirstVersion, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<6>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    fake.configure({{"dmabuf", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {});
    REQUIRE(ours.net->regMrDmaBuf != nullptr);
    Connection<N, typename Abi<N>::Net> c;
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = nullptr;
    c.open(ours.net, ours.ctx, 0, &sendDev, &recvDev);

    // A real descriptor, as NCCL gets from cuMemGetHandleForAddressRange;
    // NCCL closes it right after the call, so the inner plugin must see it
    // during the call: the inode it saw is the memfd's.
    const int fd = memfd_create("passthrough-dmabuf", 0);
    REQUIRE(fd >= 0);
    struct stat st {};
    REQUIRE(fstat(fd, &st) == 0);
    std::vector<char> in(4096, 0);
    void* recvMr = nullptr;
    REQUIRE(ours.net->regMrDmaBuf(c.recvComm, in.data(), in.size(), NCCL_PTR_CUDA, 0, fd,
                                  &recvMr) == ncclSuccess);
    close(fd);
    REQUIRE(recvMr != nullptr);
    FakeNetStats s = fake.stats();
    CHECK(s.regMrDmaBufCalls == 1);
    CHECK(s.lastDmaBufFd == fd);
    CHECK(s.lastDmaBufOffset == 0);
    CHECK(s.lastDmaBufSize == in.size());
    CHECK(s.lastDmaBufType == NCCL_PTR_CUDA);
    CHECK(s.lastDmaBufInode == static_cast<uint64_t>(st.st_ino));
    CHECK(s.liveMhandles == 1);

    // The region carries a receive (the fake moves host bytes).
    std::vector<char> out(in.size(), 'x');
    void* sendMr = nullptr;
    REQUIRE(regMrOn<N>(ours.net, c.sendComm, out.data(), out.size(), &sendMr) == ncclSuccess);
    void* recvReq = nullptr;
    void* sendReq = nullptr;
    REQUIRE(irecvOn<N>(ours.net, c.recvComm, in.data(), in.size(), recvMr, &recvReq) ==
            ncclSuccess);
    REQUIRE(recvReq != nullptr);
    REQUIRE(isendOn<N>(ours.net, c.sendComm, out.data(), out.size(), sendMr, &sendReq) ==
            ncclSuccess);
    REQUIRE(sendReq != nullptr);
    REQUIRE(testUntilDone(ours.net, sendReq) == ncclSuccess);
    REQUIRE(testUntilDone(ours.net, recvReq) == ncclSuccess);
    CHECK(in == out);

    // A descriptor that is not open (a closed one's number may be reused
    // at once): the inner plugin's refusal comes back.
    void* bad = nullptr;
    CHECK(ours.net->regMrDmaBuf(c.recvComm, in.data(), in.size(), NCCL_PTR_CUDA, 0, -1, &bad) !=
          ncclSuccess);
    CHECK(bad == nullptr);
    CHECK(fake.stats().regMrDmaBufCalls == 2);

    CHECK(ours.net->deregMr(c.recvComm, recvMr) == ncclSuccess);
    CHECK(ours.net->deregMr(c.sendComm, sendMr) == ncclSuccess);
    CHECK(fake.stats().liveMhandles == 0);
    c.close(ours.net);
  });
}

TEST_CASE("makeVDevice reaches the inner plugin and its virtual device carries connections",
          "[plugin][passthrough][fusion]") {
  const int version = GENERATE(range(9, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<9>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    using Props = typename Abi<N>::Props;
    fake.configure({{"ports", 3}, {"fusion", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {});
    REQUIRE(ours.net->makeVDevice != nullptr);
    decltype(Props{}.vProps) v{};
    v.ndevs = 2;
    v.devs[0] = 2;  // root first, as NCCL orders them
    v.devs[1] = 0;
    int d = -1;
    REQUIRE(ours.net->makeVDevice(&d, &v) == ncclSuccess);
    const FakeNetStats s = fake.stats();
    CHECK(s.makeVDeviceCalls == 1);
    CHECK(s.lastVDevice.ndevs == 2);
    CHECK(s.lastVDevice.devs[0] == 2);
    CHECK(s.lastVDevice.devs[1] == 0);
    CHECK(d == 3);  // appended after the physical devices
    int ndev = 0;
    REQUIRE(ours.net->devices(&ndev) == ncclSuccess);
    CHECK(ndev == 4);
    Props virt{};
    REQUIRE(ours.net->getProperties(d, &virt) == ncclSuccess);
    REQUIRE(virt.vProps.ndevs == 2);
    CHECK(virt.vProps.devs[0] == 2);
    CHECK(virt.vProps.devs[1] == 0);
    for (int phys = 0; phys < 3; ++phys) {
      Props p{};
      REQUIRE(ours.net->getProperties(phys, &p) == ncclSuccess);
      CHECK(text(p.name) != text(virt.name));  // NCCL finds the fused devices by name
    }
    // A physical index out of range: the inner plugin's refusal comes back.
    v.devs[1] = 7;
    CHECK(ours.net->makeVDevice(&d, &v) != ncclSuccess);

    // Connections on the virtual device, through us.
    Connection<N, typename Abi<N>::Net> c;
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = nullptr;
    c.open(ours.net, ours.ctx, 3, &sendDev, &recvDev);
    char in[16] = {};
    char out[16] = "virtual device";
    void* recvReq = nullptr;
    void* sendReq = nullptr;
    REQUIRE(irecvOn<N>(ours.net, c.recvComm, in, sizeof in, nullptr, &recvReq) == ncclSuccess);
    REQUIRE(isendOn<N>(ours.net, c.sendComm, out, sizeof out, nullptr, &sendReq) == ncclSuccess);
    REQUIRE((recvReq != nullptr && sendReq != nullptr));
    REQUIRE(testUntilDone(ours.net, sendReq) == ncclSuccess);
    REQUIRE(testUntilDone(ours.net, recvReq) == ncclSuccess);
    CHECK(std::string(in) == "virtual device");
    c.close(ours.net);
    CHECK(logger.count(NCCL_LOG_WARN) == 0);
  });
}

namespace {

// A round trip of 16 bytes on `c` whose receive NCCL then consumes
// (irecvConsumed after the test() that said done).
template <int N, class Net>
void exchangeAndConsume(Net* net, Connection<N, Net>& c) {
  char in[16] = {};
  char out[16] = "offloaded";
  void* recvReq = nullptr;
  void* sendReq = nullptr;
  REQUIRE(irecvOn<N>(net, c.recvComm, in, sizeof in, nullptr, &recvReq) == ncclSuccess);
  REQUIRE(isendOn<N>(net, c.sendComm, out, sizeof out, nullptr, &sendReq) == ncclSuccess);
  REQUIRE((recvReq != nullptr && sendReq != nullptr));
  REQUIRE(testUntilDone(net, sendReq) == ncclSuccess);
  REQUIRE(testUntilDone(net, recvReq) == ncclSuccess);
  CHECK(std::string(in) == "offloaded");
  REQUIRE(net->irecvConsumed(c.recvComm, 1, recvReq) == ncclSuccess);
}

}  // namespace

TEST_CASE("device offload passes through: device handles, getDeviceMr and irecvConsumed",
          "[plugin][passthrough][offload]") {
  const int version = GENERATE(range(7, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<7>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    using Net = typename Abi<N>::Net;
    fake.configure({{"deviceType", NCCL_NET_DEVICE_UNPACK},
                    {"deviceHandle", 1},
                    {"getDeviceMr", 1},
                    {"irecvConsumed", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {});
    REQUIRE(ours.net->getDeviceMr != nullptr);
    REQUIRE(ours.net->irecvConsumed != nullptr);

    // Out-pointers to NULL: the handle the inner plugin hands out comes back.
    Connection<N, Net> c;
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = nullptr;
    c.open(ours.net, ours.ctx, 0, &sendDev, &recvDev);
    FakeNetStats s = fake.stats();
    REQUIRE(s.lastConnectDevCommOut != nullptr);
    CHECK(static_cast<void*>(sendDev) == s.lastConnectDevCommOut);
    CHECK(static_cast<void*>(recvDev) == s.lastAcceptDevCommOut);
    CHECK(s.lastConnectDevCommIn == nullptr);
    CHECK(s.lastAcceptDevCommIn == nullptr);
    CHECK(s.connectDevCommNull == 0);
    CHECK(s.acceptDevCommNull == 0);

    // getDeviceMr: what the inner plugin returned for its region.
    char buffer[16] = {};
    void* mr = nullptr;
    REQUIRE(regMrOn<N>(ours.net, c.recvComm, buffer, sizeof buffer, &mr) == ncclSuccess);
    void* deviceMr = nullptr;
    REQUIRE(ours.net->getDeviceMr(c.recvComm, mr, &deviceMr) == ncclSuccess);
    s = fake.stats();
    CHECK(s.getDeviceMrCalls == 1);
    CHECK(deviceMr != nullptr);
    CHECK(deviceMr == s.lastDeviceMr);
    CHECK(ours.net->deregMr(c.recvComm, mr) == ncclSuccess);

    // irecvConsumed: once, with the inner request of the consumed receive.
    exchangeAndConsume<N>(ours.net, c);
    s = fake.stats();
    CHECK(s.irecvConsumedCalls == 1);
    CHECK(s.irecvConsumedWrong == 0);
    c.close(ours.net);

    // NULL out-pointers reach the inner plugin as NULL.
    Connection<N, Net> plain;
    plain.open(ours.net, ours.ctx, 0, nullptr, nullptr);
    s = fake.stats();
    CHECK(s.connectDevCommNull == 1);
    CHECK(s.acceptDevCommNull == 1);
    plain.close(ours.net);
    CHECK(logger.count(NCCL_LOG_WARN) == 0);
  });
}

TEST_CASE("setNetAttr reaches the inner plugin with the caller's attributes and its own context",
          "[plugin][passthrough][netattr]") {
  const int version = GENERATE(11, 12);
  CAPTURE(version);
  Fake fake(version);
  withAbi<11>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    if constexpr (N >= 11) {
      fake.configure({{"netAttr", 1}});
      Ours<N> ours(fake, {});
      REQUIRE(ours.net->setNetAttr != nullptr);
      ncclNetAttr_v11_t attr{{1, 2, 3, 4}, {5, 6, 7, 8}, 1u << 5, 1u << 2, 1u << 1};
      CHECK(ours.net->setNetAttr(ours.ctx, &attr) == ncclSuccess);
      const FakeNetStats s = fake.stats();
      CHECK(s.setNetAttrCalls == 1);
      CHECK(s.lastNetAttrCtx == s.lastInitCtx);  // the inner context, not ours
      CHECK(s.lastNetAttrCtx != nullptr);
      CHECK(s.lastNetAttr.sendCommAttr[0] == 1);
      CHECK(s.lastNetAttr.sendCommAttr[1] == 2);
      CHECK(s.lastNetAttr.sendCommAttr[2] == 3);
      CHECK(s.lastNetAttr.sendCommAttr[3] == 4);
      CHECK(s.lastNetAttr.recvCommAttr[0] == 5);
      CHECK(s.lastNetAttr.recvCommAttr[1] == 6);
      CHECK(s.lastNetAttr.recvCommAttr[2] == 7);
      CHECK(s.lastNetAttr.recvCommAttr[3] == 8);
      CHECK(s.lastNetAttr.op == 1u << 5);
      CHECK(s.lastNetAttr.algo == 1u << 2);
      CHECK(s.lastNetAttr.proto == 1u << 1);
    }
  });
}

TEST_CASE("an inner error on a connection with a DMA-BUF region is an explained fault",
          "[plugin][passthrough][dmabuf][fault]") {
  const int version = GENERATE(range(kFirstVersion, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<6>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    fake.configure({{"dmabuf", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {{"NCCL_RESILIENT_PROGRESS_TIMEOUT_MS", "60000"}});
    Connection<N, typename Abi<N>::Net> c;
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = nullptr;
    REQUIRE(ours.net->regMrDmaBuf != nullptr);
    c.open(ours.net, ours.ctx, 0, &sendDev, &recvDev);
    const int fd = memfd_create("passthrough-fault", 0);
    REQUIRE(fd >= 0);
    char in[64] = {};
    void* mr = nullptr;
    REQUIRE(ours.net->regMrDmaBuf(c.recvComm, in, sizeof in, NCCL_PTR_CUDA, 0, fd, &mr) ==
            ncclSuccess);
    close(fd);
    void* req = nullptr;
    REQUIRE(irecvOn<N>(ours.net, c.recvComm, in, sizeof in, mr, &req) == ncclSuccess);
    REQUIRE(req != nullptr);
    fake.failNext("test", ncclSystemError);
    int done = 0;
    CHECK(ours.net->test(req, &done, nullptr) != ncclSuccess);
    CHECK(logger.count(NCCL_LOG_WARN, "transport error on recv connection of comm") == 1);
    // Sticky: the connection answers at once, with no second explanation.
    void* again = nullptr;
    CHECK(irecvOn<N>(ours.net, c.recvComm, in, sizeof in, mr, &again) != ncclSuccess);
    CHECK(logger.count(NCCL_LOG_WARN, "transport error on recv connection of comm") == 1);
    (void)ours.net->deregMr(c.recvComm, mr);  // as NCCL, before the close
    c.close(ours.net);
  });
}

TEST_CASE("a stalled receive of an offloading inner plugin is caught by the progress timeout",
          "[plugin][passthrough][offload][fault]") {
  const int version = GENERATE(range(7, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<7>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    fake.configure({{"deviceType", NCCL_NET_DEVICE_UNPACK},
                    {"deviceHandle", 1},
                    {"irecvConsumed", 1},
                    {"stallRecv", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {{"NCCL_RESILIENT_PROGRESS_TIMEOUT_MS", "300"}});
    REQUIRE(ours.net->irecvConsumed != nullptr);
    Connection<N, typename Abi<N>::Net> c;
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = nullptr;
    c.open(ours.net, ours.ctx, 0, &sendDev, &recvDev);
    REQUIRE(recvDev != nullptr);  // an offloaded receive
    char in[64] = {};
    void* req = nullptr;
    REQUIRE(irecvOn<N>(ours.net, c.recvComm, in, sizeof in, nullptr, &req) == ncclSuccess);
    REQUIRE(req != nullptr);
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t r = testUntilDone(ours.net, req, 5000);
    const auto elapsedMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    CHECK(r == ncclRemoteError);
    CHECK(elapsedMs >= 300);
    CHECK(elapsedMs < 300 + 1000);
    CHECK(logger.count(NCCL_LOG_WARN, "stuck on recv connection of comm") == 1);
    c.close(ours.net);
  });
}

TEST_CASE("an UNPACK receive's device handle, allocated by the caller, reaches the inner plugin",
          "[plugin][passthrough][offload]") {
  // NCCL allocates the handle of an UNPACK receive itself (type and version
  // filled in) and passes its address to accept; the plugin fills in the
  // rest (src/transport/net.cc, ncclNetGetDeviceHandle). Any other
  // out-pointer points at NULL.
  const int version = GENERATE(range(7, kLastVersion + 1));
  CAPTURE(version);
  Fake fake(version);
  withAbi<7>(version, [&](auto abi) {
    constexpr int N = decltype(abi)::value;
    fake.configure({{"deviceType", NCCL_NET_DEVICE_UNPACK}, {"deviceHandle", 1}});
    test::CapturingLogger logger(log::Level::kWarn);
    Ours<N> ours(fake, {});
    ncclNetDeviceHandle_v7_t allocated{NCCL_NET_DEVICE_UNPACK, NCCL_NET_DEVICE_UNPACK_VERSION,
                                       nullptr, 0, 0};
    ncclNetDeviceHandle_v7_t* sendDev = nullptr;
    ncclNetDeviceHandle_v7_t* recvDev = &allocated;
    Connection<N, typename Abi<N>::Net> c;
    c.open(ours.net, ours.ctx, 0, &sendDev, &recvDev);
    const FakeNetStats s = fake.stats();
    CHECK(s.lastAcceptDevCommIn == static_cast<void*>(&allocated));
    CHECK(recvDev == &allocated);  // still the caller's, filled in
    CHECK(allocated.handle != nullptr);
    CHECK(allocated.size != 0);
    CHECK(s.lastConnectDevCommIn == nullptr);
    c.close(ours.net);
  });
}
