// The node agent's store proxy (store/proxy/node_proxy.h) seen from the job's
// store: the node's ranks arrive at a barrier in one upstream arrival and
// wait for its release in one upstream call; their heartbeats go up in
// batches; a reader through the proxy never sees an older value than it
// wrote; an upstream restart makes the local clients see one; an upstream
// that does not answer is a lost store for them, not a bad argument. (Every
// other call's semantics: the conformance suite's "node-proxy" backend.)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "store/errors.h"
#include "store/memory_store.h"
#include "store/proxy/node_proxy.h"
#include "store/tcp/client.h"
#include "tests/support/forwarding_store.h"
#include "tests/support/mock_logger.h"
#include "tests/unit/store/store_test_util.h"

using namespace resilient;
using namespace resilient::store;
using std::chrono::milliseconds;

namespace {

// The job's store, counting what reaches it.
class CountingStore final : public test::ForwardingStore {
 public:
  CountingStore() : ForwardingStore(std::make_shared<MemoryStore>()) {}
  std::atomic<int> barrierCalls{0};
  std::atomic<int> barrierRanks{0};
  std::atomic<int> expiringBatches{0};
  std::atomic<int> expiringSingles{0};
  std::atomic<bool> down{false};
  // Calls of one kind held on their way to the store until released.
  class Gate {
   public:
    void hold() {
      std::lock_guard<std::mutex> lock(mutex_);
      holding_ = true;
    }
    void waitForHeld() {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return held_ > 0; });
    }
    void release() {
      std::lock_guard<std::mutex> lock(mutex_);
      holding_ = false;
      cv_.notify_all();
    }
    void pass() {
      std::unique_lock<std::mutex> lock(mutex_);
      if (holding_) {
        ++held_;
        cv_.notify_all();
        cv_.wait(lock, [this] { return !holding_; });
      }
    }

   private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool holding_ = false;
    int held_ = 0;
  };
  Gate batches;      // setExpiringMany
  Gate compareSets;  // compareSet

  void setExpiring(std::string_view k, std::string_view v, Millis ttl, Timeout t) override {
    ForwardingStore::setExpiring(k, v, ttl, t);
    ++expiringSingles;
  }
  void setExpiringMany(const std::vector<KeyValue>& pairs, Millis ttl, Timeout t) override {
    batches.pass();
    ForwardingStore::setExpiringMany(pairs, ttl, t);
    ++expiringBatches;
  }
  CasResult compareSet(std::string_view k, std::optional<std::string_view> e, std::string_view d,
                       Timeout t) override {
    compareSets.pass();
    return ForwardingStore::compareSet(k, e, d, t);
  }
  BarrierResult barrier(const BarrierArrival& a, Timeout t) override {
    onCall();
    ++barrierCalls;
    barrierRanks += a.ranks.empty() ? 1 : static_cast<int>(a.ranks.size());
    return inner().barrier(a, t);
  }
  std::string describe() const override { return "counting(memory)"; }

 private:
  void onCall() override {
    if (down.load()) {
      throw ConnectionLost("the job's store is unreachable (test)");
    }
  }
};

ClientOptions local(const std::string& token = "node") {
  ClientOptions o = test::testClientOptions();
  o.token = token;
  return o;
}

struct Node {
  std::shared_ptr<CountingStore> job = std::make_shared<CountingStore>();
  std::unique_ptr<proxy::NodeProxy> proxy;
  explicit Node(proxy::NodeProxyOptions o = {}) {
    o.token = "node";
    proxy = std::make_unique<proxy::NodeProxy>(job, o);
  }
  std::shared_ptr<tcp::TcpStoreClient> client(ClientOptions o = local()) {
    return std::make_shared<tcp::TcpStoreClient>("127.0.0.1", proxy->port(), o);
  }
};

}  // namespace

TEST_CASE("a node's ranks reach a barrier in one upstream arrival and one wait",
          "[store][proxy]") {
  Node node;
  constexpr int kLocal = 8;
  constexpr int kWorld = 16;  // the other 8 are another node's, arriving directly
  std::vector<std::shared_ptr<tcp::TcpStoreClient>> ranks;
  for (int r = 0; r < kLocal; ++r) {
    ranks.push_back(node.client());
    ranks.back()->get("warm-up");  // connected before the barrier
  }
  const int callsBefore = node.job->barrierCalls.load();
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kLocal; ++r) {
    threads.emplace_back([&, r] {
      const BarrierResult res = ranks[static_cast<size_t>(r)]->barrier(
          BarrierArrival{"iteration", 3, r, kWorld, true}, Timeout(milliseconds(20000)));
      if (res.completed && res.arrived == kWorld) {
        ++released;
      }
    });
  }
  // The other node, later (the local arrivals are counted by then).
  std::this_thread::sleep_for(milliseconds(200));
  for (int r = kLocal; r < kWorld; ++r) {
    node.job->inner().barrier(BarrierArrival{"iteration", 3, r, kWorld, false});
  }
  for (std::thread& t : threads) {
    t.join();
  }
  CHECK(released == kLocal);
  const int calls = node.job->barrierCalls.load() - callsBefore;
  INFO("upstream barrier calls: " << calls);
  // One arrival for the 8 (two when one of them came late) and one wait.
  CHECK(calls <= 3);
  CHECK(node.job->barrierRanks.load() <= kLocal + 2);
  CHECK(node.proxy->counters().localBarrierArrivals == kLocal);

  // A late arrival at the completed generation is answered at once.
  const BarrierResult late =
      ranks[0]->barrier(BarrierArrival{"iteration", 3, 0, kWorld, true}, Timeout(milliseconds(1000)));
  CHECK(late.completed);
}

TEST_CASE("a mark through the proxy returns once counted; a timeout names the missing ranks",
          "[store][proxy]") {
  Node node;
  auto a = node.client();
  auto b = node.client();
  const BarrierResult marked =
      a->barrier(BarrierArrival{"b", 0, 1, 4, false}, Timeout(milliseconds(5000)));
  CHECK_FALSE(marked.completed);
  CHECK(marked.arrived == 1);
  try {
    b->barrier(BarrierArrival{"b", 0, 0, 4, true}, Timeout(milliseconds(300)));
    FAIL("the barrier completed without ranks 2 and 3");
  } catch (const BarrierTimeout& e) {
    CHECK(e.report().missingRanks == std::vector<int>{2, 3});
  }
  // A surplus rank goes up as it is and comes back an overflow.
  CHECK_THROWS_AS(a->barrier(BarrierArrival{"b", 0, 7, 4, true}, Timeout(milliseconds(300))),
                  BarrierOverflow);
  // Another world size than the generation's first arrival said.
  CHECK_THROWS_AS(a->barrier(BarrierArrival{"b", 0, 2, 5, true}, Timeout(milliseconds(300))),
                  InvalidArgument);
}

TEST_CASE("heartbeats go up in batches, and a reader sees what it wrote", "[store][proxy]") {
  proxy::NodeProxyOptions o;
  o.expiringLinger = milliseconds(300);
  Node node(o);
  std::vector<std::shared_ptr<tcp::TcpStoreClient>> monitors;
  for (int r = 0; r < 8; ++r) {
    monitors.push_back(node.client());
  }
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < 8; ++r) {
      monitors[static_cast<size_t>(r)]->setExpiring(
          "heartbeat/" + std::to_string(r), std::to_string(round), milliseconds(30000));
    }
    std::this_thread::sleep_for(milliseconds(350));
  }
  CHECK(node.job->expiringSingles == 0);
  CHECK(node.job->expiringBatches <= 4);  // one per linger, 8 heartbeats in each
  CHECK(node.job->inner().get("heartbeat/5") == std::optional<std::string>("2"));
  CHECK(node.proxy->counters().localExpiringWrites == 24);

  // Queued, then read back through the proxy at once: written first.
  monitors[0]->setExpiring("heartbeat/0", "fresh", milliseconds(30000));
  CHECK(monitors[1]->get("heartbeat/0") == std::optional<std::string>("fresh"));
  // A plain set after a queued expiring write wins, as on the store itself.
  monitors[0]->setExpiring("k", "expiring", milliseconds(30000));
  monitors[0]->set("k", "plain");
  std::this_thread::sleep_for(milliseconds(400));
  CHECK(node.job->inner().get("k") == std::optional<std::string>("plain"));
}

TEST_CASE("a plain write of a key whose expiring write is on its way up waits for it",
          "[store][proxy]") {
  // Seen in the conformance suite under ASan: the periodic flush had taken
  // the queue (expiring "kept") and was writing it when a plain set of "kept"
  // came; the set found nothing queued, went up first, and the batch then
  // overwrote it with the expiring value, which expired.
  proxy::NodeProxyOptions o;
  o.expiringLinger = milliseconds(20);
  Node node(o);
  auto c = node.client();
  node.job->batches.hold();
  c->setExpiring("kept", "expiring", milliseconds(30000));
  node.job->batches.waitForHeld();  // the flush has taken the queue
  auto plain = std::async(std::launch::async, [&] { c->set("kept", "permanent"); });
  // Before the fix the set returned at once; now it waits for the batch.
  CHECK(plain.wait_for(milliseconds(500)) == std::future_status::timeout);
  node.job->batches.release();
  plain.get();
  CHECK(node.job->inner().get("kept") == std::optional<std::string>("permanent"));
}

TEST_CASE("an upstream restart is a restart for the node's clients", "[store][proxy]") {
  Node node;
  std::atomic<int> restarts{0};
  ClientOptions o = local();
  o.followRestarts = true;
  o.onServerRestart = [&] { ++restarts; };
  auto rank = node.client(o);
  rank->set("identity", "rank 3");
  // The job's store comes back empty; the proxy's client notes the restart.
  node.job->inner().removePrefix("");
  node.proxy->upstreamRestarted();
  // No answer of the new instance reaches the client before it knows of the
  // restart (the agent drill with store kills: monitors read their
  // siblings' heartbeats as missing and declared three ranks dead).
  int emptyBeforeRestart = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (restarts == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      if (!rank->get("identity") && restarts == 0) {
        ++emptyBeforeRestart;
      }
    } catch (const StoreError&) {
    }
  }
  CHECK(restarts == 1);
  CHECK(emptyBeforeRestart == 0);
}

// The agent drill with the store killed 5 ms after a SIGKILL: a replacement
// connected to the proxy between the upstream restart's note (a new instance
// id) and the proxy's closing of the local connections; closed with the
// others although it had been told the new id, it found the same id again
// and its registration's compare-and-set failed, "the request may or may not
// have been applied" (exit 1). Now only the old instance's connections close.
TEST_CASE("a client that connected after an upstream restart keeps its connection",
          "[store][proxy]") {
  test::CapturingLogger logger(log::Level::kWarn);
  Node node;
  // The proxy's own thread, which closes the old instance's connections,
  // is held in a write of the heartbeats.
  node.job->batches.hold();
  auto monitor = node.client();
  monitor->setExpiring("heartbeat/0", "1", milliseconds(30000));
  node.job->batches.waitForHeld();
  node.proxy->upstreamRestarted();
  auto fresh = node.client();
  fresh->set("y", "1");  // connected after the restart's note
  node.job->compareSets.hold();
  auto cas = std::async(std::launch::async,
                        [&] { return fresh->compareSet("z", std::nullopt, "v"); });
  node.job->compareSets.waitForHeld();
  node.job->batches.release();  // the proxy's thread acts on the restart
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (logger.count(NCCL_LOG_WARN, "the job's store restarted") == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));  // polling the log for the proxy's act
  }
  REQUIRE(logger.count(NCCL_LOG_WARN, "the job's store restarted") == 1);
  node.job->compareSets.release();
  CasResult r;
  CHECK_NOTHROW(r = cas.get());
  CHECK(r.swapped);
}

TEST_CASE("an unreachable job store is a lost store through the proxy", "[store][proxy]") {
  Node node;
  ClientOptions o = local();
  o.reconnectTimeout = milliseconds(200);
  auto rank = node.client(o);
  rank->set("a", "1");
  node.job->down = true;
  CHECK_THROWS_AS(rank->get("a"), ConnectionLost);
  node.job->down = false;
  CHECK_THROWS_AS(node.client(local("wrong"))->get("a"), AuthRefused);
}
