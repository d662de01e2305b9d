// Every version shim (v6..v12) against the fake plugin of that version:
// properties, connection setup polling, the data path, contexts and init
// reference counting, and the mapping of the plugin's errors.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/external/external_transport.h"
#include "tests/support/mock_logger.h"
#include "tests/unit/transport/external/fake_plugin.h"

using namespace resilient;
using namespace resilient::test;
using transport::CommConfig;
using transport::Properties;

namespace {

constexpr size_t kGiB = size_t{1} << 30;

// A logger handed to the plugin, recording what the plugin logs.
std::mutex gPluginLogMutex;
std::vector<std::string> gPluginLog;

void recordPluginLog(ncclDebugLogLevel /*level*/, unsigned long /*flags*/, const char* /*file*/,
                     int /*line*/, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gPluginLogMutex);
  gPluginLog.emplace_back(buf);
}

// A profiler callback counting what the plugin emits.
int gProfilerEvents = 0;
int gProfilerToken = 0;  // its address is the event handle we hand out

ncclResult_t countProfilerEvents(void** eHandle, int type, void* /*pHandle*/, int64_t /*pluginId*/,
                                 void* /*extData*/) {
  ++gProfilerEvents;
  if (type == ncclProfilerNetCallbackStart) {
    *eHandle = &gProfilerToken;
  }
  return ncclSuccess;
}

// One loaded fake with one context.
struct Fixture {
  explicit Fixture(int v, LoadOptions options = {}, CommConfig config = {})
      : version(v), fake(v), transport(loadFake(v, std::move(options))) {
    Status s = transport->initContext(0xc0ffee + static_cast<uint64_t>(v), config, &ctx);
    INFO(s.toString());
    REQUIRE(s.ok());
    REQUIRE(ctx != nullptr);
  }
  ~Fixture() {
    if (ctx != nullptr) {
      (void)ctx->finalize();
    }
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  int version;
  FakeModule fake;
  std::unique_ptr<ExternalTransport> transport;
  std::unique_ptr<transport::Context> ctx;  // destroyed before the transport
};

std::vector<std::byte> pattern(size_t size, char seed) {
  std::vector<std::byte> v(size);
  for (size_t i = 0; i < size; ++i) {
    v[i] = static_cast<std::byte>(seed + static_cast<char>(i * 7));
  }
  return v;
}

}  // namespace

TEST_CASE("devices and properties of every version", "[external][versions]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;

  int ndev = -1;
  REQUIRE(t.devices(&ndev).ok());
  CHECK(ndev == 2);

  Properties p;
  REQUIRE(t.properties(1, &p).ok());
  CHECK(std::string(p.name) == "fake1");
  CHECK(p.pciPath == nullptr);
  CHECK(p.guid == 0xfa4e0001u);
  CHECK(p.ptrSupport == transport::kPtrHost);
  CHECK(p.speedMbps == 100000);
  CHECK(p.port == 2);
  CHECK(p.latencyUs == Approx(1.5));
  CHECK(p.maxComms == 1024);
  CHECK(p.maxRecvs == 8);
  CHECK(p.forceFlush == 0);
  // Fields a version lacks get NCCL's assumptions.
  CHECK(p.regIsGlobal == (version >= 8 ? 1 : 0));
  if (version >= 9) {
    CHECK(p.maxP2pBytes == NCCL_MAX_NET_SIZE_BYTES);
    CHECK(p.maxCollBytes == 3 * kGiB);
  } else {
    CHECK(p.maxP2pBytes == kGiB);
    CHECK(p.maxCollBytes == kGiB / 2);
  }
  // The strings stay valid (and equal) across calls.
  Properties again;
  REQUIRE(t.properties(1, &again).ok());
  CHECK(again.name == p.name);

  Status bad = t.properties(7, &p);
  CHECK(bad.kind() == ErrorKind::kInternal);
  CHECK_THAT(bad.message(), Catch::Contains("getProperties returned ncclInternalError"));
}

TEST_CASE("a device's offload type is passed through (v7+)", "[external][versions]") {
  // Issue 33: it was refused; NCCL accepts HOST, and UNPACK of version 7
  // (src/plugin/net.cc, ncclNetCheckDeviceVersion), and so must the wrapper.
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  f.fake.set("deviceType", NCCL_NET_DEVICE_UNPACK);
  Properties p;
  REQUIRE(f.transport->properties(0, &p).ok());
  CHECK(p.netDeviceType == (version == 6 ? NCCL_NET_DEVICE_HOST : NCCL_NET_DEVICE_UNPACK));
}

TEST_CASE("the plugin gets our logger, or one that forwards to the log facade",
          "[external][versions]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  const std::string expected = "FakeV" + std::to_string(version) + ": init";
  SECTION("the caller's logger") {
    {
      std::lock_guard<std::mutex> lock(gPluginLogMutex);
      gPluginLog.clear();
    }
    LoadOptions o;
    o.logger = &recordPluginLog;
    Fixture f(version, o);
    CHECK(f.fake.stats().logCalls == 1);
    std::lock_guard<std::mutex> lock(gPluginLogMutex);
    REQUIRE(gPluginLog.size() == 1);
    CHECK_THAT(gPluginLog[0], Catch::StartsWith(expected));
  }
  SECTION("none given: the facade") {
    CapturingLogger capture;
    Fixture f(version);
    CHECK(f.fake.stats().logCalls == 1);
    CHECK(capture.count(NCCL_LOG_INFO, "inner plugin: " + expected) == 1);
  }
}

TEST_CASE("connect and accept are polled; the connect state lives in the handle",
          "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  f.fake.set("connectPolls", 3);
  FakePair pair = connectFake(t, f.ctx.get());
  CHECK(pair.connectPolls == 3);
  CHECK(pair.acceptPolls >= 3);
  // The fake writes 20 bytes; the rest of the handle stays zero.
  CHECK(std::all_of(pair.handle.begin() + 20, pair.handle.end(),
                    [](std::byte c) { return c == std::byte{0}; }));
  const FakeNetStats s = f.fake.stats();
  CHECK(s.liveComms == 3);
  CHECK(s.connectCalls == 4);
  closeFake(pair);
  CHECK(f.fake.stats().liveComms == 0);
}

TEST_CASE("isend/irecv/test move bytes of every size, in posting order", "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  const size_t size = GENERATE(size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 20);
  const bool recvFirst = GENERATE(false, true);
  CAPTURE(version, size, recvFirst);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());

  std::vector<std::byte> out = pattern(size, 'a');
  std::vector<std::byte> in(size + 16, std::byte{0});
  std::unique_ptr<transport::MemoryRegion> sendMr;
  std::unique_ptr<transport::MemoryRegion> recvMr;
  REQUIRE(pair.sendComm->regMr(out.data(), out.size(), transport::kPtrHost, &sendMr).ok());
  REQUIRE(pair.recvComm->regMr(in.data(), in.size(), transport::kPtrHost, &recvMr).ok());
  REQUIRE(sendMr != nullptr);
  REQUIRE(recvMr != nullptr);

  transport::Request* sendReq = nullptr;
  // A stale value in the out-pointer must be overwritten.
  transport::Request* recvReq = reinterpret_cast<transport::Request*>(&recvMr);
  std::byte* recvData[1] = {in.data()};
  const size_t recvSizes[1] = {in.size()};
  const int tags[1] = {42};
  transport::MemoryRegion* recvMrs[1] = {recvMr.get()};
  auto postRecv = [&] {
    REQUIRE(pair.recvComm->irecv(1, recvData, recvSizes, tags, recvMrs, nullptr, &recvReq).ok());
    REQUIRE(recvReq != reinterpret_cast<transport::Request*>(&recvMr));
  };
  auto postSend = [&] {
    REQUIRE(pair.sendComm->isend(out.data(), size, 42, sendMr.get(), nullptr, &sendReq).ok());
  };
  if (recvFirst) {
    postRecv();
    postSend();
  } else {
    postSend();
    postRecv();
  }
  int sendSize = -1;
  waitDone(sendReq, &sendSize);
  CHECK(sendSize == static_cast<int>(size));
  int recvSize = -1;
  waitDone(recvReq, &recvSize);
  CHECK(recvSize == static_cast<int>(size));
  CHECK(std::equal(out.begin(), out.end(), in.begin()));
  CHECK(f.fake.stats().liveRequests == 0);

  // iflush passes through; the fake has nothing to wait for.
  transport::Request* flushReq = reinterpret_cast<transport::Request*>(&flushReq);
  const int flushSizes[1] = {static_cast<int>(size)};
  REQUIRE(pair.recvComm->iflush(1, recvData, flushSizes, recvMrs, &flushReq).ok());
  CHECK(flushReq == nullptr);
  CHECK(f.fake.stats().iflushCalls == 1);

  REQUIRE(pair.sendComm->deregMr(std::move(sendMr)).ok());
  REQUIRE(pair.recvComm->deregMr(std::move(recvMr)).ok());
  CHECK(f.fake.stats().liveMhandles == 0);
  closeFake(pair);
}

TEST_CASE("requests go back to their comm's pool, which holds what NCCL may have out",
          "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  FakePair pair = connectFake(*f.transport, f.ctx.get());
  // Many more transfers than any pool holds, as many at a time as the fake
  // takes (NCCL_NET_MAX_REQUESTS; 8 for v6).
  const int depth = version == 6 ? 8 : transport::kMaxRequests;
  std::byte out{0x5a};
  std::byte in{0};
  std::byte* recvData[1] = {&in};
  const size_t sizes[1] = {1};
  const int tags[1] = {0};
  for (int round = 0; round < 8; ++round) {
    std::vector<transport::Request*> sends(depth, nullptr);
    std::vector<transport::Request*> recvs(depth, nullptr);
    for (int i = 0; i < depth; ++i) {
      REQUIRE(pair.sendComm->isend(&out, 1, 0, nullptr, nullptr, &sends[i]).ok());
      REQUIRE(sends[i] != nullptr);
      REQUIRE(pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, nullptr, &recvs[i]).ok());
      REQUIRE(recvs[i] != nullptr);
    }
    for (int i = 0; i < depth; ++i) {
      waitDone(sends[i], nullptr);
      waitDone(recvs[i], nullptr);
    }
  }
  CHECK(in == out);
  CHECK(f.fake.stats().liveRequests == 0);

  // A plugin that takes more than that: the send pool holds kMaxRequests
  // times the device's maxRecvs (8), then says "cannot post now".
  f.fake.set("maxRequests", 100000);
  int posted = 0;
  for (;; ++posted) {
    transport::Request* r = nullptr;
    REQUIRE(pair.sendComm->isend(&out, 1, 0, nullptr, nullptr, &r).ok());
    if (r == nullptr) {
      break;
    }
    REQUIRE(posted < 100000);
  }
  CHECK(posted == transport::kMaxRequests * 8);
  closeFake(pair);
}

TEST_CASE("a receive stays out until irecvConsumed passes it on (v11 with irecvConsumed)",
          "[external][datapath]") {
  Fixture f(11);
  f.fake.set("irecvConsumed", 1);
  REQUIRE(f.transport->capabilities().irecvConsumed);
  FakePair pair = connectFake(*f.transport, f.ctx.get());
  std::byte out{0x11};
  std::byte in{0};
  std::byte* recvData[1] = {&in};
  const size_t sizes[1] = {1};
  const int tags[1] = {0};
  // Every receive of the pool completes but is not consumed yet: the pool
  // runs dry (kPoolSize receives), and each consumed receive frees one.
  constexpr size_t kPool = transport::external::ExternalRecvComm::kPoolSize;
  std::vector<transport::Request*> recvs;
  for (size_t i = 0; i < kPool; ++i) {
    transport::Request* send = nullptr;
    transport::Request* recv = nullptr;
    REQUIRE(pair.sendComm->isend(&out, 1, 0, nullptr, nullptr, &send).ok());
    REQUIRE(pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, nullptr, &recv).ok());
    REQUIRE(recv != nullptr);
    waitDone(send, nullptr);
    waitDone(recv, nullptr);
    recvs.push_back(recv);
  }
  transport::Request* none = reinterpret_cast<transport::Request*>(&none);
  REQUIRE(pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, nullptr, &none).ok());
  CHECK(none == nullptr);  // all held until consumed: "cannot post now"
  for (transport::Request* r : recvs) {
    REQUIRE(pair.recvComm->irecvConsumed(1, r).ok());
  }
  const FakeNetStats s = f.fake.stats();
  CHECK(s.irecvConsumedCalls == static_cast<int>(kPool));
  CHECK(s.irecvConsumedWrong == 0);
  transport::Request* again = nullptr;
  REQUIRE(pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, nullptr, &again).ok());
  CHECK(again != nullptr);
  closeFake(pair);
}

TEST_CASE("a multi-receive takes one send per tag", "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());

  constexpr int kN = 3;
  const int tags[kN] = {7, 3, 5};
  const size_t capacity[kN] = {64, 128, 256};
  std::vector<std::vector<std::byte>> in(kN);
  std::byte* recvData[kN];
  for (int i = 0; i < kN; ++i) {
    in[i].assign(capacity[i], std::byte{0});
    recvData[i] = in[i].data();
  }
  transport::Request* recvReq = nullptr;
  REQUIRE(pair.recvComm->irecv(kN, recvData, capacity, tags, nullptr, nullptr, &recvReq).ok());
  const FakeNetStats posted = f.fake.stats();
  CHECK(posted.lastRecvN == kN);
  CHECK(posted.lastRecvTags[1] == 3);
  CHECK(posted.lastRecvSizes[2] == 256);

  // Sent in another order than the tags of the receive, with other sizes.
  const int sendTags[kN] = {3, 5, 7};
  const size_t sendSizes[kN] = {100, 0, 50};
  std::vector<std::vector<std::byte>> out;
  std::vector<transport::Request*> sendReqs(kN, nullptr);
  for (int i = 0; i < kN; ++i) {
    out.push_back(pattern(sendSizes[i], static_cast<char>('A' + i)));
    REQUIRE(pair.sendComm
                ->isend(out[i].data(), sendSizes[i], sendTags[i], nullptr, nullptr, &sendReqs[i])
                .ok());
  }
  for (transport::Request* r : sendReqs) {
    waitDone(r, nullptr);
  }
  int sizes[kN] = {-1, -1, -1};
  waitDone(recvReq, sizes);
  CHECK(sizes[0] == 50);   // tag 7
  CHECK(sizes[1] == 100);  // tag 3
  CHECK(sizes[2] == 0);    // tag 5
  CHECK(std::equal(out[2].begin(), out[2].end(), in[0].begin()));
  CHECK(std::equal(out[0].begin(), out[0].end(), in[1].begin()));
  closeFake(pair);
}

TEST_CASE("a plugin that cannot post now returns no request, and that is not an error",
          "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());
  f.fake.set("maxRequests", 1);
  std::byte byte{'x'};
  transport::Request* first = nullptr;
  transport::Request* second = reinterpret_cast<transport::Request*>(&second);
  REQUIRE(pair.sendComm->isend(&byte, 1, 0, nullptr, nullptr, &first).ok());
  REQUIRE(first != nullptr);
  REQUIRE(pair.sendComm->isend(&byte, 1, 0, nullptr, nullptr, &second).ok());
  CHECK(second == nullptr);
  // Closing a comm with a request outstanding releases it.
  closeFake(pair);
  CHECK(f.fake.stats().liveRequests == 0);
}

TEST_CASE("profiler handles reach v10+ plugins and are dropped before", "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  gProfilerEvents = 0;
  LoadOptions o;
  o.profilerCallback = &countProfilerEvents;
  Fixture f(version, o);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());
  int sendStep = 0;
  int recvStep = 0;
  // NCCL's handles are opaque to us: any address passes through.
  auto* sendHandle = reinterpret_cast<transport::ProfilerHandle*>(&sendStep);
  transport::ProfilerHandle* phandles[1] = {
      reinterpret_cast<transport::ProfilerHandle*>(&recvStep)};
  std::byte out{'q'};
  std::byte in{0};
  std::byte* recvData[1] = {&in};
  const size_t sizes[1] = {1};
  const int tags[1] = {1};
  transport::Request* sendReq = nullptr;
  transport::Request* recvReq = nullptr;
  REQUIRE(pair.sendComm->isend(&out, 1, 1, nullptr, sendHandle, &sendReq).ok());
  REQUIRE(pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, phandles, &recvReq).ok());
  waitDone(sendReq, nullptr);
  waitDone(recvReq, nullptr);
  CHECK(in == std::byte{'q'});
  const FakeNetStats s = f.fake.stats();
  if (version >= 10) {
    CHECK(s.lastPhandle == &sendStep);
    CHECK(s.lastRecvPhandle == &recvStep);
    CHECK(s.profilerCalls == 2);  // start and stop
    CHECK(gProfilerEvents == 2);
  } else {
    CHECK(s.lastPhandle == nullptr);
    CHECK(s.lastRecvPhandle == nullptr);
    CHECK(gProfilerEvents == 0);
  }
  closeFake(pair);
}

TEST_CASE("without a profiler callback v10+ plugins get a no-op", "[external][datapath]") {
  const int version = GENERATE(10, 11);
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());
  int step = 0;
  std::byte byte{'z'};
  transport::Request* req = nullptr;
  REQUIRE(
      pair.sendComm
          ->isend(&byte, 1, 0, nullptr, reinterpret_cast<transport::ProfilerHandle*>(&step), &req)
          .ok());
  CHECK(f.fake.stats().profilerCalls == 1);  // start only: the no-op returns no event
  closeFake(pair);
}

TEST_CASE("the communicator config reaches v10 connect and v11 init", "[external][datapath]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  CommConfig config;
  config.trafficClass = 5;
  Fixture f(version, {}, config);
  FakePair pair = connectFake(*f.transport, f.ctx.get());
  const FakeNetStats s = f.fake.stats();
  if (version >= 10) {
    CHECK(s.lastTrafficClass == 5);
  } else {
    CHECK(s.lastTrafficClass == -2);  // older versions have no config
  }
  if (version >= 11) {
    CHECK(s.lastCommId == 0xc0ffee + static_cast<uint64_t>(version));
  }
  closeFake(pair);
}

TEST_CASE("a device handle from connect or accept is passed through when asked for (v7+)",
          "[external][datapath]") {
  // Issue 33: it was refused as device offload. The out-pointer reaches the
  // plugin as the caller gave it (NULL, or one the caller reads back).
  const int version = GENERATE(range(7, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  f.fake.set("connectPolls", 0);
  f.fake.set("deviceHandle", 1);
  for (const bool want : {true, false}) {
    CAPTURE(want);
    std::array<std::byte, 128> handle{};
    std::unique_ptr<transport::Listener> listener;
    REQUIRE(t.listen(f.ctx.get(), 0, handle.data(), &listener).ok());
    std::unique_ptr<transport::SendComm> sendComm;
    REQUIRE(t.connect(f.ctx.get(), 0, handle.data(), want, &sendComm).ok());
    REQUIRE(sendComm != nullptr);
    std::unique_ptr<transport::RecvComm> recvComm;
    REQUIRE(listener->accept(want, &recvComm).ok());
    REQUIRE(recvComm != nullptr);
    if (want) {
      const auto* sent = reinterpret_cast<const ncclNetDeviceHandle_v7_t*>(sendComm->deviceHandle());
      const auto* received =
          reinterpret_cast<const ncclNetDeviceHandle_v7_t*>(recvComm->deviceHandle());
      REQUIRE(sent != nullptr);
      REQUIRE(received != nullptr);
      CHECK(sent->netDeviceType == NCCL_NET_DEVICE_UNPACK);
      CHECK(received->netDeviceVersion == NCCL_NET_DEVICE_UNPACK_VERSION);
    } else {
      CHECK(sendComm->deviceHandle() == nullptr);
      CHECK(recvComm->deviceHandle() == nullptr);
    }
    REQUIRE(sendComm->close().ok());
    REQUIRE(recvComm->close().ok());
    REQUIRE(listener->close().ok());
  }
  CHECK(f.fake.stats().liveComms == 0);
}

TEST_CASE("old versions are initialised once; v11 once per context", "[external][refcount]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  FakeModule fake(version);
  auto t = loadFake(version);
  std::vector<std::unique_ptr<transport::Context>> contexts(3);
  for (size_t i = 0; i < contexts.size(); ++i) {
    REQUIRE(t->initContext(100 + i, CommConfig{}, &contexts[i]).ok());
    REQUIRE(contexts[i] != nullptr);
  }
  CHECK(contexts[0] != contexts[1]);
  CHECK(t->liveContexts() == 3);
  CHECK(fake.stats().initCalls == (version >= 11 ? 3 : 1));
  for (auto& ctx : contexts) {
    REQUIRE(ctx->finalize().ok());
  }
  CHECK(t->liveContexts() == 0);
  CHECK(fake.stats().finalizeCalls == (version >= 11 ? 3 : 0));  // no finalize before v11
  CHECK(fake.stats().liveContexts == 0);
  contexts.clear();  // destroying finalized contexts finalizes nothing more
  CHECK(fake.stats().finalizeCalls == (version >= 11 ? 3 : 0));

  // A new communicator after the last one went away: still no second init
  // of an old plugin, which has no finalize to undo the first.
  std::unique_ptr<transport::Context> again;
  REQUIRE(t->initContext(200, CommConfig{}, &again).ok());
  CHECK(fake.stats().initCalls == (version >= 11 ? 4 : 1));
  // A context destroyed without finalize is finalized by its destructor.
  again.reset();
  CHECK(t->liveContexts() == 0);
  CHECK(fake.stats().finalizeCalls == (version >= 11 ? 4 : 0));
}

TEST_CASE("a failed init: v11 finalizes its context, older versions stay failed",
          "[external][refcount]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  FakeModule fake(version);
  auto t = loadFake(version);
  fake.failNext("init", ncclSystemError);
  std::unique_ptr<transport::Context> ctx;
  Status s = t->initContext(1, CommConfig{}, &ctx);
  CHECK(s.kind() == ErrorKind::kSystem);
  CHECK_THAT(s.message(), Catch::Contains("init returned ncclSystemError (2)"));
  CHECK(ctx == nullptr);
  CHECK(t->liveContexts() == 0);
  if (version >= 11) {
    CHECK(fake.stats().finalizeCalls == 1);  // finalize(NULL), as NCCL does
    REQUIRE(t->initContext(2, CommConfig{}, &ctx).ok());
    REQUIRE(ctx->finalize().ok());
  } else {
    Status again = t->initContext(2, CommConfig{}, &ctx);
    CHECK(again.kind() == ErrorKind::kSystem);
    CHECK(again.message() == s.message());
    CHECK(fake.stats().initCalls == 0);
  }
}

TEST_CASE("each ncclResult_t of the plugin maps to one error kind", "[external][errors]") {
  struct Case {
    ncclResult_t code;
    ErrorKind kind;
    const char* name;
  };
  const Case c =
      GENERATE(Case{ncclSystemError, ErrorKind::kSystem, "ncclSystemError"},
               Case{ncclRemoteError, ErrorKind::kRemote, "ncclRemoteError"},
               Case{ncclInvalidUsage, ErrorKind::kInvalidUsage, "ncclInvalidUsage"},
               Case{ncclInvalidArgument, ErrorKind::kInvalidUsage, "ncclInvalidArgument"},
               Case{ncclInternalError, ErrorKind::kInternal, "ncclInternalError"},
               Case{ncclUnhandledCudaError, ErrorKind::kInternal, "ncclUnhandledCudaError"});
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  const char* call = GENERATE("isend", "irecv", "test", "connect", "accept", "closeSend");
  CAPTURE(c.name, version, call);
  Fixture f(version);
  auto& t = *f.transport;
  f.fake.set("connectPolls", 0);
  FakePair pair = connectFake(t, f.ctx.get());
  std::byte out{'s'};
  std::byte in{0};
  std::byte* recvData[1] = {&in};
  const size_t sizes[1] = {1};
  const int tags[1] = {0};
  transport::Request* sendReq = nullptr;
  std::array<std::byte, 128> handle = pair.handle;
  REQUIRE(pair.sendComm->isend(&out, 1, 0, nullptr, nullptr, &sendReq).ok());

  f.fake.failNext(call, c.code);
  Status s;
  const std::string which = call;
  if (which == "isend") {
    transport::Request* req = reinterpret_cast<transport::Request*>(&req);
    s = pair.sendComm->isend(&out, 1, 0, nullptr, nullptr, &req);
    CHECK(req == nullptr);
  } else if (which == "irecv") {
    transport::Request* recvReq = reinterpret_cast<transport::Request*>(&recvReq);
    s = pair.recvComm->irecv(1, recvData, sizes, tags, nullptr, nullptr, &recvReq);
    CHECK(recvReq == nullptr);
  } else if (which == "test") {
    int done = 1;
    s = sendReq->test(&done, nullptr);
    CHECK(done == 0);
  } else if (which == "connect") {
    std::unique_ptr<transport::SendComm> extra;
    s = t.connect(f.ctx.get(), 0, handle.data(), false, &extra);
    CHECK(extra == nullptr);
  } else if (which == "accept") {
    std::unique_ptr<transport::RecvComm> extra;
    s = pair.listener->accept(false, &extra);
    CHECK(extra == nullptr);
  } else {
    s = pair.sendComm->close();  // failed: closeFake closes it again
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == c.kind);
  CHECK(s.message() == "external net plugin FakeV" + std::to_string(version) + " (ncclNetPlugin_v" +
                           std::to_string(version) + "): " + which + " returned " + c.name + " (" +
                           std::to_string(static_cast<int>(c.code)) + ")");
  closeFake(pair);
}

TEST_CASE("ncclInProgress from the plugin is success, as in NCCL's checks", "[external][errors]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());
  f.fake.failNext("isend", ncclInProgress);
  std::byte byte{0};
  transport::Request* req = reinterpret_cast<transport::Request*>(&req);
  CHECK(pair.sendComm->isend(&byte, 1, 0, nullptr, nullptr, &req).ok());
  CHECK(req == nullptr);  // the plugin wrote nothing: "cannot post now"
  closeFake(pair);
}

TEST_CASE("pluginStatus maps codes outside the enum to internal errors", "[external][errors]") {
  using transport::external::pluginStatus;
  CHECK(pluginStatus(ncclSuccess, "P", 9, "test").ok());
  CHECK(pluginStatus(ncclInProgress, "P", 9, "test").ok());
  Status s = pluginStatus(static_cast<ncclResult_t>(42), "P", 9, "test");
  CHECK(s.kind() == ErrorKind::kInternal);
  CHECK(s.message() ==
        "external net plugin P (ncclNetPlugin_v9): test returned unknown result (42)");
}

TEST_CASE("sizes beyond INT_MAX are refused for int-sized versions (<= v8)", "[external][errors]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  Fixture f(version);
  auto& t = *f.transport;
  FakePair pair = connectFake(t, f.ctx.get());
  const size_t huge = static_cast<size_t>(INT_MAX) + 1;
  std::byte byte{0};
  const FakeNetStats before = f.fake.stats();

  transport::Request* req = reinterpret_cast<transport::Request*>(&req);
  Status s = pair.sendComm->isend(&byte, huge, 0, nullptr, nullptr, &req);
  std::byte* recvData[2] = {&byte, &byte};
  const size_t sizes[2] = {1, huge};
  const int tags[2] = {0, 1};
  transport::Request* recvReq = reinterpret_cast<transport::Request*>(&recvReq);
  Status r = pair.recvComm->irecv(2, recvData, sizes, tags, nullptr, nullptr, &recvReq);
  std::unique_ptr<transport::MemoryRegion> mr;
  Status m = pair.sendComm->regMr(&byte, huge, transport::kPtrHost, &mr);

  if (version <= 8) {
    CHECK(s.kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(s.message(), Catch::Contains("isend: size 2147483648 exceeds INT_MAX"));
    CHECK(req == nullptr);
    CHECK(r.kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(r.message(), Catch::Contains("irecv: size 2147483648 exceeds INT_MAX"));
    CHECK(recvReq == nullptr);
    CHECK(f.fake.stats().isendCalls == before.isendCalls);  // never reached the plugin
    CHECK(f.fake.stats().irecvCalls == before.irecvCalls);
  } else {
    // size_t all the way: the plugin sees the full size (nothing matches it;
    // closing the comms releases the requests).
    CHECK(s.ok());
    CHECK(f.fake.stats().lastIsendSize == huge);
    CHECK(r.ok());
    CHECK(f.fake.stats().lastRecvSizes[1] == huge);
  }
  if (version <= 7) {
    CHECK(m.kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(m.message(), Catch::Contains("regMr: size 2147483648 exceeds INT_MAX"));
    CHECK(mr == nullptr);
  } else {
    REQUIRE(m.ok());
    REQUIRE(pair.sendComm->deregMr(std::move(mr)).ok());
  }
  closeFake(pair);
  CHECK(f.fake.stats().liveRequests == 0);
}

TEST_CASE("irecv and iflush refuse n outside 1..64 without calling the plugin",
          "[external][errors]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  const int n = GENERATE(0, -1, 65);
  CAPTURE(version, n);
  Fixture f(version);
  FakePair pair = connectFake(*f.transport, f.ctx.get());
  transport::Request* req = reinterpret_cast<transport::Request*>(&req);
  Status s = pair.recvComm->irecv(n, nullptr, nullptr, nullptr, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(req == nullptr);
  req = reinterpret_cast<transport::Request*>(&req);
  s = pair.recvComm->iflush(n, nullptr, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(req == nullptr);
  CHECK(f.fake.stats().irecvCalls == 0);
  CHECK(f.fake.stats().iflushCalls == 0);
  closeFake(pair);
}

TEST_CASE("a v12 plugin is driven through v12: its rail and plane reach the properties",
          "[external][versions]") {
  // NCCL 2.30's ABI: 8 fused devices in vProps (every later field moved) and
  // railId / planeId at the end. The fake reports rail 10 + dev, plane dev % 2.
  FakeModule fake(12);
  auto t = loadFake(12);
  CHECK(t->abiVersion() == 12);
  std::unique_ptr<transport::Context> ctx;
  REQUIRE(t->initContext(1, CommConfig{}, &ctx).ok());
  for (int dev = 0; dev < 2; ++dev) {
    Properties p;
    REQUIRE(t->properties(dev, &p).ok());
    CHECK(p.railId == 10 + dev);
    CHECK(p.planeId == dev % 2);
    CHECK(p.maxP2pBytes == NCCL_MAX_NET_SIZE_BYTES);  // read at v12's offset, not v11's
    CHECK(p.maxRecvs == 8);
  }
  REQUIRE(ctx->finalize().ok());
  // Older versions know no rail or plane.
  FakeModule old(11);
  auto t11 = loadFake(11);
  REQUIRE(t11->initContext(1, CommConfig{}, &ctx).ok());
  Properties p;
  REQUIRE(t11->properties(0, &p).ok());
  CHECK(p.railId == -1);
  CHECK(p.planeId == -1);
  REQUIRE(ctx->finalize().ok());
}
