#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/fault/fault_transport.h"
#include "plugin/transport/fault/spec.h"
#include "tests/support/memory_transport.h"
#include "tests/support/mock_logger.h"

using namespace resilient;
using namespace resilient::transport;
using namespace resilient::transport::fault;
using resilient::test::MemoryTransport;

namespace {

// A clock the test moves by hand; starts at 1 s so that 0 is never "now".
class FakeClock {
 public:
  uint64_t now() const { return ns_.load(std::memory_order_relaxed); }
  void advanceMs(uint64_t ms) { ns_.fetch_add(ms * 1000000, std::memory_order_relaxed); }
  void advanceNs(uint64_t ns) { ns_.fetch_add(ns, std::memory_order_relaxed); }
  // A std::function view for FaultTransport; the FakeClock must outlive it.
  auto function() {
    return [this] { return now(); };
  }

 private:
  std::atomic<uint64_t> ns_{1000000000};
};

constexpr size_t kMsg = 1000;

// A FaultTransport over a MemoryTransport with a fake clock, and one
// connected send/receive pair through it.
class Rig {
 public:
  explicit Rig(const std::string& spec, const std::string& listenAddress = "10.0.0.2:40000") {
    Result<std::vector<FaultRule>> rules = parseFaultSpec(spec);
    REQUIRE(rules.ok());
    auto inner = std::make_unique<MemoryTransport>();
    fake = inner.get();
    transport = std::make_unique<FaultTransport>(std::move(inner), std::move(rules).value(),
                                                 clock.function());
    connectPair(listenAddress);
  }
  ~Rig() { closeAll(); }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // Captures (and keeps off stderr) the warnings of the rig's lifetime.
  test::CapturingLogger logger{log::Level::kWarn};

  // Another connection through the same transport.
  void connectPair(const std::string& listenAddress) {
    fake->setNextListenAddress(listenAddress);
    std::array<std::byte, kHandleSize> handle{};
    std::unique_ptr<Listener> listen;
    REQUIRE(transport->listen(nullptr, 0, handle.data(), &listen).ok());
    REQUIRE(listen != nullptr);
    std::unique_ptr<SendComm> send;
    REQUIRE(transport->connect(nullptr, 0, handle.data(), false, &send).ok());
    REQUIRE(send != nullptr);
    std::unique_ptr<RecvComm> recv;
    REQUIRE(listen->accept(false, &recv).ok());
    REQUIRE(recv != nullptr);
    listens.push_back(std::move(listen));
    sends.push_back(std::move(send));
    recvs.push_back(std::move(recv));
  }

  void closeAll() {
    for (auto& c : sends) {
      CHECK(c->close().ok());
    }
    for (auto& c : recvs) {
      CHECK(c->close().ok());
    }
    for (auto& l : listens) {
      CHECK(l->close().ok());
    }
    sends.clear();
    recvs.clear();
    listens.clear();
  }

  Request* postSend(size_t pair = 0, size_t size = kMsg, int tag = 0) {
    Request* request = nullptr;
    const Status s = sends.at(pair)->isend(sendBuf.data(), size, tag, nullptr, nullptr, &request);
    REQUIRE(s.ok());
    REQUIRE(request != nullptr);
    return request;
  }
  Status trySend(Request** request, size_t pair = 0) {
    *request = nullptr;
    return sends.at(pair)->isend(sendBuf.data(), kMsg, 0, nullptr, nullptr, request);
  }
  Request* postRecv(size_t pair = 0) {
    Request* request = nullptr;
    const Status s = tryRecv(&request, pair);
    REQUIRE(s.ok());
    REQUIRE(request != nullptr);
    return request;
  }
  Status tryRecv(Request** request, size_t pair = 0) {
    std::byte* data = recvBuf.data();
    const size_t size = recvBuf.size();
    const int tag = 0;
    *request = nullptr;
    return recvs.at(pair)->irecv(1, &data, &size, &tag, nullptr, nullptr, request);
  }
  // One test() call that must succeed; returns done.
  bool done(Request* request, int* sizes = nullptr) {
    int d = -1;
    const Status s = request->test(&d, sizes);
    REQUIRE(s.ok());
    return d == 1;
  }
  // Polls up to `polls` times without moving the clock.
  bool doneWithin(Request* request, int polls = 5) {
    for (int i = 0; i < polls; ++i) {
      if (done(request)) {
        return true;
      }
    }
    return false;
  }
  // A send and a receive on `pair` that both complete at once.
  void exchange(size_t pair = 0) {
    Request* r = postRecv(pair);
    Request* s = postSend(pair);
    CHECK(doneWithin(s));
    CHECK(doneWithin(r));
  }

  FakeClock clock;
  MemoryTransport* fake = nullptr;
  std::unique_ptr<FaultTransport> transport;
  std::vector<std::unique_ptr<Listener>> listens;
  std::vector<std::unique_ptr<SendComm>> sends;
  std::vector<std::unique_ptr<RecvComm>> recvs;
  std::vector<std::byte> sendBuf = std::vector<std::byte>(size_t{64} * 1024, std::byte{'x'});
  std::vector<std::byte> recvBuf = std::vector<std::byte>(size_t{64} * 1024, std::byte{0});
};

void checkInjected(const Status& s, ErrorKind kind, const std::string& rule) {
  CAPTURE(s.toString());
  CHECK_FALSE(s.ok());
  CHECK(s.kind() == kind);
  CHECK(s.message() == "injected fault: " + rule);
}

}  // namespace

// ---- stall -----------------------------------------------------------------

TEST_CASE("stall: sends after N never complete, nor does the peer's receive", "[fault][stall]") {
  Rig rig("kind=stall,op=isend,after=2");
  rig.exchange();
  rig.exchange();
  CHECK(rig.logger.count(NCCL_LOG_WARN, "armed") == 0);

  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  const int64_t innerTests = rig.fake->testCalls;
  for (int i = 0; i < 20; ++i) {
    rig.clock.advanceMs(1000);
    CHECK_FALSE(rig.done(s));
    CHECK_FALSE(rig.done(r));
  }
  // The stalled send never reached the inner transport's test: no progress.
  CHECK(rig.fake->testCalls == innerTests + 20);  // only the receive's tests

  // One warning names the rule and the peer.
  CHECK(rig.logger.count(NCCL_LOG_WARN, "rule 'kind=stall,op=isend,after=2' armed") == 1);
  CHECK(rig.logger.count(NCCL_LOG_WARN, "10.0.0.2:40000") == 1);
}

TEST_CASE("stall: duration ends the stall and the held requests complete", "[fault][stall]") {
  Rig rig("kind=stall,duration=500");
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  CHECK_FALSE(rig.doneWithin(s));
  CHECK_FALSE(rig.doneWithin(r));
  rig.clock.advanceMs(499);
  CHECK_FALSE(rig.doneWithin(s));
  rig.clock.advanceMs(1);
  CHECK(rig.doneWithin(s));
  CHECK(rig.doneWithin(r));
  CHECK(std::memcmp(rig.recvBuf.data(), rig.sendBuf.data(), kMsg) == 0);
  rig.exchange();  // expired for good
}

TEST_CASE("stall: op=test holds test calls on a direction", "[fault][stall]") {
  Rig rig("kind=stall,op=test,dir=recv,after=1");
  rig.exchange();  // the receive's first test call passes
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  CHECK(rig.doneWithin(s));  // send comms are not watched
  rig.clock.advanceMs(60000);
  CHECK_FALSE(rig.doneWithin(r, 50));
}

// ---- error -----------------------------------------------------------------

TEST_CASE("error: the matching call fails and the comm stays failed", "[fault][error]") {
  const std::string rule = "kind=error,op=isend,after=1";
  Rig rig(rule);
  rig.exchange();

  Request* r = rig.postRecv();
  Request* s = nullptr;
  const Status err = rig.trySend(&s);
  checkInjected(err, ErrorKind::kRemote, rule);
  CHECK(err.peer() == "10.0.0.2:40000");
  CHECK(s == nullptr);
  CHECK(toNcclResult(err) == ncclRemoteError);

  // Sticky: every later call on the comm fails the same way.
  checkInjected(rig.trySend(&s), ErrorKind::kRemote, rule);
  std::unique_ptr<MemoryRegion> mh;
  CHECK(rig.sends[0]->regMr(rig.sendBuf.data(), kMsg, kPtrHost, &mh).ok());
  // The receive side is not affected.
  int d = 0;
  CHECK(r->test(&d, nullptr).ok());
  CHECK(d == 0);
  CHECK(rig.fake->isendCalls == 1);  // the failing calls never reached the inner transport
}

TEST_CASE("error: error=system injects a system error", "[fault][error]") {
  const std::string rule = "kind=error,dir=recv,error=system";
  Rig rig(rule);
  Request* r = nullptr;
  const Status err = rig.tryRecv(&r);
  checkInjected(err, ErrorKind::kSystem, rule);
  CHECK(toNcclResult(err) == ncclSystemError);
  CHECK(r == nullptr);
}

TEST_CASE("error: op=test fails a test call and every later one", "[fault][error]") {
  const std::string rule = "kind=error,op=test,dir=send,after=2";
  Rig rig(rule);
  rig.exchange();  // one test call on the send comm
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  Request* s2 = rig.postSend();
  CHECK(rig.done(s));  // second test call
  int d = 1;
  checkInjected(s2->test(&d, nullptr), ErrorKind::kRemote, rule);
  CHECK(d == 0);
  checkInjected(s2->test(&d, nullptr), ErrorKind::kRemote, rule);
  CHECK(rig.doneWithin(r));
}

// ---- close -----------------------------------------------------------------

TEST_CASE("close: the inner comm closes, the peer sees EOF, the owner's close is not repeated",
          "[fault][close]") {
  const std::string rule = "kind=close,dir=send,after=1";
  Rig rig(rule);
  rig.exchange();

  Request* r = rig.postRecv();
  Request* s = nullptr;
  checkInjected(rig.trySend(&s), ErrorKind::kRemote, rule);
  CHECK(rig.fake->closeCalls == 1);  // closed at once

  // The peer's pending receive sees the connection go away.
  int d = 0;
  const Status eof = r->test(&d, nullptr);
  CHECK(eof.kind() == ErrorKind::kRemote);
  CHECK(eof.message().find("EOF") != std::string::npos);

  // Every later call on the closed comm is a remote error, without touching the inner comm.
  checkInjected(rig.trySend(&s), ErrorKind::kRemote, rule);
  std::unique_ptr<MemoryRegion> mh;
  checkInjected(rig.sends[0]->regMr(rig.sendBuf.data(), kMsg, kPtrHost, &mh), ErrorKind::kRemote,
                rule);
  CHECK(rig.sends[0]->deregMr(nullptr).ok());
  Endpoint local;
  Endpoint peer;
  CHECK(rig.sends[0]->endpoints(&local, &peer));
  CHECK(std::string(peer.text) == "10.0.0.2:40000");

  // The owner's close: no second close of the inner comm.
  rig.closeAll();
  CHECK(rig.fake->liveComms == 0);
  CHECK(rig.fake->closeCalls == 2);  // the injected one and the receive side's
}

TEST_CASE("close: at=MS closes the receive side once its time has come", "[fault][close]") {
  const std::string rule = "kind=close,dir=recv,at=2000";
  Rig rig(rule);
  rig.exchange();
  rig.clock.advanceMs(1999);
  rig.exchange();

  Request* s = rig.postSend();
  rig.clock.advanceMs(1);
  Request* r = nullptr;
  checkInjected(rig.tryRecv(&r), ErrorKind::kRemote, rule);
  // The sender's pending send fails: its peer is gone.
  int d = 0;
  const Status eof = s->test(&d, nullptr);
  CHECK(eof.kind() == ErrorKind::kRemote);

  rig.closeAll();
  CHECK(rig.fake->liveComms == 0);
}

TEST_CASE(
    "close: outstanding requests of a closed comm fail without reaching the inner "
    "transport",
    "[fault][close]") {
  const std::string rule = "kind=close,op=test,dir=recv,after=1";
  Rig rig(rule);
  Request* r1 = rig.postRecv();
  Request* r2 = rig.postRecv();
  int d = 0;
  CHECK(r1->test(&d, nullptr).ok());  // first test call passes
  const int64_t innerTests = rig.fake->testCalls;
  checkInjected(r2->test(&d, nullptr), ErrorKind::kRemote, rule);
  checkInjected(r1->test(&d, nullptr), ErrorKind::kRemote, rule);
  CHECK(rig.fake->testCalls == innerTests);
  rig.closeAll();
  CHECK(rig.fake->liveComms == 0);
}

// ---- delay -----------------------------------------------------------------

TEST_CASE("delay: a request completes no earlier than post time + delay", "[fault][delay]") {
  Rig rig("kind=delay,delay=50,dir=recv");
  Request* r = rig.postRecv();
  rig.clock.advanceMs(10);
  Request* s = rig.postSend();
  CHECK(rig.doneWithin(s));  // the send side is not delayed
  CHECK_FALSE(rig.doneWithin(r));
  rig.clock.advanceMs(39);
  CHECK_FALSE(rig.doneWithin(r));
  rig.clock.advanceMs(1);  // 50 ms after the receive was posted
  int sizes[1] = {-1};
  CHECK(rig.done(r, sizes));
  CHECK(sizes[0] == static_cast<int>(kMsg));
}

TEST_CASE("delay: a receive posted long before its data is not held further", "[fault][delay]") {
  Rig rig("kind=delay,delay=50");
  Request* r = rig.postRecv();
  rig.clock.advanceMs(100);
  Request* s = rig.postSend();
  CHECK_FALSE(rig.doneWithin(s));  // the send itself waits 50 ms
  CHECK(rig.doneWithin(r));        // its data came after its delay had passed
  rig.clock.advanceMs(50);
  CHECK(rig.doneWithin(s));
}

TEST_CASE("delay: multi-receive sizes come back after the delay", "[fault][delay]") {
  Rig rig("kind=delay,delay=5,op=irecv");
  std::vector<std::byte> a(100);
  std::vector<std::byte> b(200);
  std::byte* data[2] = {a.data(), b.data()};
  const size_t caps[2] = {a.size(), b.size()};
  const int tags[2] = {1, 2};
  Request* r = nullptr;
  REQUIRE(rig.recvs[0]->irecv(2, data, caps, tags, nullptr, nullptr, &r).ok());
  Request* s1 = rig.postSend(0, 150, 2);
  Request* s2 = rig.postSend(0, 60, 1);
  CHECK(rig.doneWithin(s1));
  CHECK(rig.doneWithin(s2));
  int sizes[2] = {0, 0};
  CHECK_FALSE(rig.done(r, sizes));
  rig.clock.advanceMs(5);
  CHECK(rig.done(r, sizes));
  CHECK(sizes[0] == 60);
  CHECK(sizes[1] == 150);
}

// ---- slow ------------------------------------------------------------------

TEST_CASE("slow: completions are paced under the rate", "[fault][slow]") {
  // 1 MB/s: a 1000-byte send is one millisecond of link time.
  Rig rig("kind=slow,rate=1M,dir=send");
  constexpr int kCount = 20;
  std::vector<Request*> recvs;
  std::vector<Request*> sends;
  for (int i = 0; i < kCount; ++i) {
    recvs.push_back(rig.postRecv());
    sends.push_back(rig.postSend());
  }
  const uint64_t start = rig.clock.now();
  std::vector<uint64_t> completedAt(kCount, 0);
  int completed = 0;
  for (int step = 0; step < 1000 && completed < kCount; ++step) {
    for (int i = 0; i < kCount; ++i) {
      if (completedAt[i] == 0 && rig.done(sends[i])) {
        completedAt[i] = rig.clock.now() - start;
        ++completed;
      }
    }
    // Bytes completed so far stay within rate × elapsed (plus the request in flight).
    const uint64_t elapsedNs = rig.clock.now() - start;
    CHECK(static_cast<uint64_t>(completed) * kMsg <= elapsedNs / 1000 + kMsg);
    rig.clock.advanceNs(100000);  // 0.1 ms
  }
  REQUIRE(completed == kCount);
  for (int i = 0; i < kCount; ++i) {
    CAPTURE(i, completedAt[i]);
    CHECK(completedAt[i] >= static_cast<uint64_t>(i + 1) * 1000000);
    CHECK(completedAt[i] <= static_cast<uint64_t>(i + 1) * 1000000 + 100000);
  }
  for (Request* r : recvs) {
    CHECK(rig.doneWithin(r));  // receives were not watched
  }
}

TEST_CASE("slow: the paced link reads as backlogged while its pace runs ahead", "[fault][slow]") {
  // The net plugin's slow-link comparison samples Transport::linkBacklogged:
  // a slow rule is the link's network, so its link is backlogged while
  // completions wait for the pace, and idle (the inner's answer) after.
  Rig rig("kind=slow,rate=1M,dir=send");
  bool backlogged = true;
  CHECK_FALSE(rig.sends[0]->linkBacklogged(&backlogged));  // idle: the inner's
  std::vector<Request*> sends;
  for (int i = 0; i < 5; ++i) {
    rig.postRecv();
    sends.push_back(rig.postSend());
  }
  for (Request* s : sends) {
    CHECK_FALSE(rig.done(s));  // 5 ms of link time taken
  }
  backlogged = false;
  REQUIRE(rig.sends[0]->linkBacklogged(&backlogged));
  CHECK(backlogged);
  rig.clock.advanceMs(6);
  for (Request* s : sends) {
    CHECK(rig.done(s));
  }
  CHECK_FALSE(rig.sends[0]->linkBacklogged(&backlogged));
}

TEST_CASE("slow: an idle link lets the next request through at rate again", "[fault][slow]") {
  Rig rig("kind=slow,rate=1M,op=irecv");
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  CHECK(rig.doneWithin(s));
  CHECK_FALSE(rig.doneWithin(r));
  rig.clock.advanceMs(1);
  CHECK(rig.doneWithin(r));
  rig.clock.advanceMs(1000);  // idle: no credit is banked beyond one request
  r = rig.postRecv();
  s = rig.postSend();
  CHECK(rig.doneWithin(s));
  CHECK_FALSE(rig.doneWithin(r));
  rig.clock.advanceMs(1);
  CHECK(rig.doneWithin(r));
}

// ---- arming ----------------------------------------------------------------

TEST_CASE("arming: after=N counts matching calls per comm", "[fault][arming]") {
  const std::string rule = "kind=error,op=isend,after=3";
  Rig rig(rule);
  rig.connectPair("10.0.0.3:40000");
  for (int i = 0; i < 3; ++i) {
    rig.exchange(0);
  }
  rig.exchange(1);  // the second comm has its own count
  Request* s = nullptr;
  checkInjected(rig.trySend(&s, 0), ErrorKind::kRemote, rule);
  rig.exchange(1);
  rig.exchange(1);
  checkInjected(rig.trySend(&s, 1), ErrorKind::kRemote, rule);
}

TEST_CASE("arming: posts count for a data rule, test calls do not", "[fault][arming]") {
  const std::string rule = "kind=error,after=1";
  Rig rig(rule);
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(rig.done(r));  // nothing was sent yet: ten test calls on the receive comm
  }
  CHECK(rig.doneWithin(s));
  CHECK(rig.doneWithin(r));
  checkInjected(rig.trySend(&s), ErrorKind::kRemote, rule);  // the second isend
  checkInjected(rig.tryRecv(&r), ErrorKind::kRemote, rule);  // the second irecv
}

TEST_CASE("arming: at=MS arms by the fake clock, from the transport's creation",
          "[fault][arming]") {
  const std::string rule = "kind=error,at=1000";
  Rig rig(rule);
  rig.clock.advanceMs(999);
  rig.exchange();
  rig.clock.advanceMs(1);
  Request* s = nullptr;
  checkInjected(rig.trySend(&s), ErrorKind::kRemote, rule);
}

TEST_CASE("arming: duration bounds an at= window for every comm", "[fault][arming]") {
  const std::string rule = "kind=error,dir=send,at=100,duration=50";
  Rig rig(rule);
  rig.connectPair("10.0.0.3:40000");
  rig.clock.advanceMs(120);
  Request* s = nullptr;
  checkInjected(rig.trySend(&s, 0), ErrorKind::kRemote, rule);
  rig.clock.advanceMs(30);  // 150 ms: the window is over
  rig.exchange(1);
  rig.connectPair("10.0.0.4:40000");
  rig.exchange(2);
  // The first comm stays failed: a failed comm never recovers.
  checkInjected(rig.trySend(&s, 0), ErrorKind::kRemote, rule);
}

TEST_CASE("arming: a window that passed before any call never arms", "[fault][arming]") {
  Rig rig("kind=stall,at=10,duration=10");
  rig.clock.advanceMs(25);
  rig.exchange();
  CHECK(rig.logger.count(NCCL_LOG_WARN, "armed") == 0);
}

TEST_CASE("arming: delay ends with its duration", "[fault][arming]") {
  Rig rig("kind=delay,delay=10,duration=100,op=isend");
  Request* r = rig.postRecv();
  Request* s = rig.postSend();
  CHECK_FALSE(rig.doneWithin(s));
  rig.clock.advanceMs(10);
  CHECK(rig.doneWithin(s));
  CHECK(rig.doneWithin(r));
  rig.clock.advanceMs(90);
  rig.exchange();
}

TEST_CASE("arming: one warning per rule and comm, not per call", "[fault][arming]") {
  Rig rig("kind=delay,delay=1");
  rig.connectPair("10.0.0.3:40000");
  for (int i = 0; i < 10; ++i) {
    for (size_t pair = 0; pair < 2; ++pair) {
      Request* r = rig.postRecv(pair);
      Request* s = rig.postSend(pair);
      rig.clock.advanceMs(1);
      CHECK(rig.doneWithin(s));
      CHECK(rig.doneWithin(r));
    }
  }
  // Two comms per pair.
  CHECK(rig.logger.count(NCCL_LOG_WARN, "rule 'kind=delay,delay=1' armed") == 4);
  CHECK(rig.logger.count(NCCL_LOG_WARN, "peer 10.0.0.3:40000") == 1);
  CHECK(rig.logger.count(NCCL_LOG_WARN, "NET/Resilient") == 4);
}

// ---- filters ---------------------------------------------------------------

TEST_CASE("filter: peer= selects comms by their peer's address", "[fault][filter]") {
  const std::string rule = "kind=error,op=isend,peer=10.0.0.3";
  Rig rig(rule);  // peer 10.0.0.2:40000
  rig.connectPair("10.0.0.3:40000");
  rig.exchange(0);
  Request* s = nullptr;
  checkInjected(rig.trySend(&s, 1), ErrorKind::kRemote, rule);
  rig.exchange(0);
}

TEST_CASE("filter: dir= selects send or receive comms", "[fault][filter]") {
  const std::string rule = "kind=error,dir=recv";
  Rig rig(rule);
  Request* s = rig.postSend();
  Request* r = nullptr;
  checkInjected(rig.tryRecv(&r), ErrorKind::kRemote, rule);
  CHECK_FALSE(rig.doneWithin(s));  // no receive was posted
}

TEST_CASE("filter: peer= on receive comms matches the connecting side", "[fault][filter]") {
  const std::string rule = "kind=error,dir=recv,peer=10.0.0.1:50002";
  Rig rig(rule);                      // connection 1
  rig.connectPair("10.0.0.3:40000");  // connection 2: receive peer 10.0.0.1:50002
  rig.exchange(0);
  Request* r = nullptr;
  checkInjected(rig.tryRecv(&r, 1), ErrorKind::kRemote, rule);
}

// ---- prob ------------------------------------------------------------------

namespace {

// Which of `count` sends the rule delayed, in posting order.
std::vector<bool> delayedPattern(const std::string& spec, int count) {
  Rig rig(spec);
  std::vector<bool> delayed;
  for (int i = 0; i < count; ++i) {
    Request* r = rig.postRecv();
    Request* s = rig.postSend();
    delayed.push_back(!rig.done(s));
    REQUIRE(rig.doneWithin(r));
  }
  // The delayed requests complete once their time has come.
  rig.clock.advanceMs(1000);
  return delayed;
}

}  // namespace

TEST_CASE("prob: a seeded random subset of calls, the same for the same seed", "[fault][prob]") {
  const std::vector<bool> a =
      delayedPattern("kind=delay,delay=1000,dir=send,prob=0.3,seed=42", 100);
  const std::vector<bool> b =
      delayedPattern("kind=delay,delay=1000,dir=send,prob=0.3,seed=42", 100);
  const std::vector<bool> c =
      delayedPattern("kind=delay,delay=1000,dir=send,prob=0.3,seed=43", 100);
  CHECK(a == b);
  CHECK(a != c);
  const auto hits = std::count(a.begin(), a.end(), true);
  CHECK(hits >= 15);
  CHECK(hits <= 45);
}

TEST_CASE("prob: 0 never acts, 1 always acts", "[fault][prob]") {
  const std::vector<bool> never = delayedPattern("kind=delay,delay=1000,prob=0", 20);
  const std::vector<bool> always = delayedPattern("kind=delay,delay=1000,dir=send,prob=1", 20);
  CHECK(std::count(never.begin(), never.end(), true) == 0);
  CHECK(std::count(always.begin(), always.end(), true) == 20);
}

TEST_CASE("prob: a probabilistic error picks the same call for the same seed", "[fault][prob]") {
  const auto firstFailure = [](uint64_t seed) {
    Rig rig("kind=error,op=isend,prob=0.1,seed=" + std::to_string(seed));
    for (int i = 0; i < 1000; ++i) {
      Request* r = rig.postRecv();
      Request* s = nullptr;
      if (!rig.trySend(&s).ok()) {
        return i;
      }
      CHECK(rig.doneWithin(s));
      CHECK(rig.doneWithin(r));
    }
    return -1;
  };
  const int first = firstFailure(5);
  CHECK(first >= 0);
  CHECK(firstFailure(5) == first);
}

// ---- pass-through ------------------------------------------------------------

TEST_CASE("passthrough: with no rules the inner comms and requests are handed out",
          "[fault][passthrough]") {
  Rig rig("");
  CHECK(rig.fake->made(*rig.sends[0]));
  CHECK(rig.fake->made(*rig.recvs[0]));
  rig.exchange();
  CHECK(std::memcmp(rig.recvBuf.data(), rig.sendBuf.data(), kMsg) == 0);
  CHECK(std::string(rig.transport->name()) == "fault:memory");
}

TEST_CASE("passthrough: comms no rule matches forward every call", "[fault][passthrough]") {
  Rig rig("kind=stall,peer=192.168.");
  CHECK_FALSE(rig.fake->made(*rig.sends[0]));  // wrapped, but not faulted
  for (int i = 0; i < 100; ++i) {
    rig.exchange();
  }
  CHECK(rig.fake->isendCalls == 100);
  CHECK(rig.fake->irecvCalls == 100);
  CHECK(rig.fake->testCalls == 200);  // one test() each: nothing added, nothing held

  uint64_t bytes = 0;
  CHECK(rig.sends[0]->bytesMoved(&bytes));
  CHECK(bytes == 100 * kMsg);
  Endpoint local;
  Endpoint peer;
  REQUIRE(rig.sends[0]->endpoints(&local, &peer));
  CHECK(std::string(peer.text) == "10.0.0.2:40000");
  CHECK(std::string(local.text) == "10.0.0.1:50001");

  std::unique_ptr<MemoryRegion> mh;
  CHECK(rig.recvs[0]->regMr(rig.recvBuf.data(), kMsg, kPtrHost, &mh).ok());
  REQUIRE(mh != nullptr);
  std::byte* data = rig.recvBuf.data();
  const int size = static_cast<int>(kMsg);
  MemoryRegion* region = mh.get();
  Request* flush = nullptr;
  CHECK(rig.recvs[0]->iflush(1, &data, &size, &region, &flush).ok());
  REQUIRE(flush != nullptr);
  CHECK(rig.doneWithin(flush));
  CHECK(rig.recvs[0]->deregMr(std::move(mh)).ok());
  int ndev = 0;
  CHECK(rig.transport->devices(&ndev).ok());
  CHECK(ndev == 1);
  CHECK(rig.transport->handleBytes() == rig.fake->handleBytes());
}

TEST_CASE("passthrough: a faulted comm's requests recycle through the pool",
          "[fault][passthrough]") {
  // Far more requests than the pool holds, each completed before the next.
  Rig rig("kind=delay,delay=1,op=irecv");
  for (int i = 0; i < 1000; ++i) {
    Request* r = rig.postRecv();
    Request* s = rig.postSend();
    CHECK(rig.doneWithin(s));
    rig.clock.advanceMs(1);
    CHECK(rig.doneWithin(r));
  }
  // A full pool answers "retry" (no request) instead of failing.
  std::vector<Request*> pending;
  Request* r = nullptr;
  for (int i = 0; i < 2 * kMaxRequests; ++i) {
    REQUIRE(rig.tryRecv(&r).ok());
    REQUIRE(r != nullptr);
    pending.push_back(r);
  }
  REQUIRE(rig.tryRecv(&r).ok());
  CHECK(r == nullptr);
}

// ---- connect / accept ------------------------------------------------------------

TEST_CASE("connect: a stalled connect does not finish until the stall ends", "[fault][connect]") {
  test::CapturingLogger logger(log::Level::kWarn);
  auto rules = parseFaultSpec("kind=stall,op=connect,duration=100");
  REQUIRE(rules.ok());
  FakeClock clock;
  auto inner = std::make_unique<MemoryTransport>();
  MemoryTransport* fake = inner.get();
  FaultTransport t(std::move(inner), std::move(rules).value(), clock.function());
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<Listener> listen;
  REQUIRE(t.listen(nullptr, 0, handle.data(), &listen).ok());
  std::unique_ptr<SendComm> send;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(t.connect(nullptr, 0, handle.data(), false, &send).ok());
    CHECK(send == nullptr);
    clock.advanceMs(9);
  }
  CHECK(logger.count(NCCL_LOG_WARN, "armed on connect (peer 10.0.0.2:40000)") == 1);
  clock.advanceMs(10);
  REQUIRE(t.connect(nullptr, 0, handle.data(), false, &send).ok());
  REQUIRE(send != nullptr);
  std::unique_ptr<RecvComm> recv;
  REQUIRE(listen->accept(false, &recv).ok());
  REQUIRE(recv != nullptr);
  CHECK(send->close().ok());
  CHECK(recv->close().ok());
  CHECK(listen->close().ok());
  CHECK(fake->liveComms == 0);
}

TEST_CASE("connect: a stalled accept never finishes; the parked comm is closed with the listener",
          "[fault][connect]") {
  test::CapturingLogger logger(log::Level::kWarn);
  auto rules = parseFaultSpec("kind=stall,op=accept");
  REQUIRE(rules.ok());
  FakeClock clock;
  auto inner = std::make_unique<MemoryTransport>();
  MemoryTransport* fake = inner.get();
  FaultTransport t(std::move(inner), std::move(rules).value(), clock.function());
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<Listener> listen;
  REQUIRE(t.listen(nullptr, 0, handle.data(), &listen).ok());
  std::unique_ptr<SendComm> send;
  REQUIRE(t.connect(nullptr, 0, handle.data(), false, &send).ok());
  REQUIRE(send != nullptr);
  std::unique_ptr<RecvComm> recv;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(listen->accept(false, &recv).ok());
    CHECK(recv == nullptr);
    clock.advanceMs(1000);
  }
  CHECK(listen->close().ok());
  CHECK(fake->closeCalls == 1);  // the held receive comm
  CHECK(send->close().ok());
  CHECK(fake->liveComms == 0);
}

TEST_CASE("connect: an error rule fails the connect and closes what the inner made",
          "[fault][connect]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const std::string rule = "kind=error,op=connect,peer=10.0.0.2";
  auto rules = parseFaultSpec(rule);
  REQUIRE(rules.ok());
  auto inner = std::make_unique<MemoryTransport>();
  MemoryTransport* fake = inner.get();
  FaultTransport t(std::move(inner), std::move(rules).value());
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<Listener> listen;
  REQUIRE(t.listen(nullptr, 0, handle.data(), &listen).ok());
  std::unique_ptr<SendComm> send;
  const Status err = t.connect(nullptr, 0, handle.data(), false, &send);
  checkInjected(err, ErrorKind::kRemote, rule);
  CHECK(err.peer() == "10.0.0.2:40000");
  CHECK(send == nullptr);
  CHECK(fake->closeCalls == 1);
  // The accepting side gets a connection whose peer is gone.
  std::unique_ptr<RecvComm> recv;
  REQUIRE(listen->accept(false, &recv).ok());
  REQUIRE(recv != nullptr);
  std::vector<std::byte> buf(16);
  std::byte* data = buf.data();
  const size_t size = buf.size();
  const int tag = 0;
  Request* r = nullptr;
  REQUIRE(recv->irecv(1, &data, &size, &tag, nullptr, nullptr, &r).ok());
  int d = 0;
  CHECK(r->test(&d, nullptr).kind() == ErrorKind::kRemote);
  CHECK(recv->close().ok());
  CHECK(listen->close().ok());
  CHECK(fake->liveComms == 0);
}

TEST_CASE("connect: a close rule hands out a closed connection", "[fault][connect]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const std::string rule = "kind=close,op=accept";
  auto rules = parseFaultSpec(rule);
  REQUIRE(rules.ok());
  auto inner = std::make_unique<MemoryTransport>();
  MemoryTransport* fake = inner.get();
  FaultTransport t(std::move(inner), std::move(rules).value());
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<Listener> listen;
  REQUIRE(t.listen(nullptr, 0, handle.data(), &listen).ok());
  std::unique_ptr<SendComm> send;
  REQUIRE(t.connect(nullptr, 0, handle.data(), false, &send).ok());
  std::unique_ptr<RecvComm> recv;
  REQUIRE(listen->accept(false, &recv).ok());
  REQUIRE(recv != nullptr);
  CHECK(fake->closeCalls == 1);
  std::vector<std::byte> buf(16);
  std::byte* data = buf.data();
  const size_t size = buf.size();
  const int tag = 0;
  Request* r = nullptr;
  checkInjected(recv->irecv(1, &data, &size, &tag, nullptr, nullptr, &r), ErrorKind::kRemote, rule);
  // The connecting side sees EOF on its first send.
  Request* s = nullptr;
  CHECK(send->isend(buf.data(), 8, 0, nullptr, nullptr, &s).kind() == ErrorKind::kRemote);
  CHECK(recv->close().ok());
  CHECK(send->close().ok());
  CHECK(listen->close().ok());
  CHECK(fake->liveComms == 0);
  CHECK(fake->closeCalls == 2);
}

TEST_CASE("connect: after=N counts established connections", "[fault][connect]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const std::string rule = "kind=error,op=connect,after=2";
  auto rules = parseFaultSpec(rule);
  REQUIRE(rules.ok());
  FaultTransport t(std::make_unique<MemoryTransport>(), std::move(rules).value());
  std::array<std::byte, kHandleSize> handle{};
  std::unique_ptr<Listener> listen;
  REQUIRE(t.listen(nullptr, 0, handle.data(), &listen).ok());
  std::vector<std::unique_ptr<SendComm>> sends;
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<SendComm> send;
    REQUIRE(t.connect(nullptr, 0, handle.data(), false, &send).ok());
    REQUIRE(send != nullptr);
    sends.push_back(std::move(send));
  }
  std::unique_ptr<SendComm> send;
  checkInjected(t.connect(nullptr, 0, handle.data(), false, &send), ErrorKind::kRemote, rule);
  for (auto& s : sends) {
    CHECK(s->close().ok());
  }
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<RecvComm> recv;
    REQUIRE(listen->accept(false, &recv).ok());
    REQUIRE(recv != nullptr);
    CHECK(recv->close().ok());
  }
  CHECK(listen->close().ok());
}
