// The sibling monitor's choices over an in-memory store: the ring, slow
// starters, terminated ranks, and every missing rank found at once.
#include <atomic>

#include <catch2/catch.hpp>

#include "restart/monitor/sibling_monitor.h"
#include "store/memory_store.h"

namespace rm = resilient::restart::monitor;
namespace st = resilient::store;
using resilient::restart::protocol::JobKeys;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kStart = 1000 * kMs;

struct Fixture {
  st::MemoryStore store;
  JobKeys keys{"job"};
  void beat(int r) { store.set(keys.heartbeat(r), "1"); }
  void stop(int r) { store.remove(keys.heartbeat(r)); }
  void terminate(int r) { store.set(keys.terminated(r), "terminated"); }
  rm::SiblingMonitor monitor(int self, int world) {
    return rm::SiblingMonitor(store, keys,
                              {.self = self,
                               .worldSize = world,
                               .heartbeatTimeout = milliseconds(300),
                               .startMonoNs = kStart,
                               .callTimeout = milliseconds(1000)});
  }
};

}  // namespace

TEST_CASE("each rank watches the next one in the ring", "[monitor][sibling]") {
  Fixture f;
  CHECK(f.monitor(0, 4).watched() == 1);
  CHECK(f.monitor(3, 4).watched() == 0);
  CHECK(f.monitor(0, 1).watched() == -1);
  auto alone = f.monitor(0, 1);
  CHECK(alone.check(kStart + 10000 * kMs).empty());
}

TEST_CASE("a slow starter is not missing before the heartbeat timeout", "[monitor][sibling]") {
  Fixture f;
  auto m = f.monitor(0, 3);
  CHECK(m.check(kStart + 100 * kMs).empty());
  CHECK(m.check(kStart + 299 * kMs).empty());
  // Never seen, and the heartbeat timeout has passed since the monitor started.
  f.beat(2);
  CHECK(m.check(kStart + 300 * kMs) == std::vector<int>{1});
}

TEST_CASE("a heartbeat seen once and then gone is missing at once", "[monitor][sibling]") {
  Fixture f;
  auto m = f.monitor(0, 3);
  f.beat(1);
  f.beat(2);
  CHECK(m.check(kStart + 10 * kMs).empty());
  f.stop(1);
  f.stop(2);
  // Rank 2 was never seen by this monitor and the timeout has not passed: not yet.
  CHECK(m.check(kStart + 20 * kMs) == std::vector<int>{1});
}

TEST_CASE("every missing rank is named, terminated ones are skipped", "[monitor][sibling]") {
  Fixture f;
  auto m = f.monitor(1, 6);
  for (int r = 0; r < 6; ++r) {
    f.beat(r);
  }
  CHECK(m.check(kStart + 10 * kMs).empty());
  f.stop(2);  // the watched one
  f.stop(4);
  f.stop(5);
  f.terminate(5);  // recorded by someone already
  // Rank 4 was never the watched one: it counts once the heartbeat timeout has passed.
  CHECK(m.check(kStart + 400 * kMs) == std::vector<int>{2, 4});
  // The next alive rank after 1 that is neither terminated nor missing.
  CHECK(m.watched() == 3);
}

TEST_CASE("terminated watched ranks move the watch on", "[monitor][sibling]") {
  Fixture f;
  auto m = f.monitor(0, 3);
  f.beat(2);
  f.terminate(1);  // died and was recorded by its own monitor; heartbeat removed
  CHECK(m.check(kStart + 400 * kMs).empty());
  CHECK(m.watched() == 2);
  f.terminate(2);
  f.stop(2);
  CHECK(m.check(kStart + 500 * kMs).empty());
  CHECK(m.watched() == -1);
}

TEST_CASE("ranks that joined the job enter the ring with a grace of their own",
          "[monitor][sibling][join]") {
  Fixture f;
  std::atomic<int32_t> slots{0};
  rm::SiblingMonitor m(f.store, f.keys,
                       {.self = 1,
                        .worldSize = 2,
                        .heartbeatTimeout = milliseconds(300),
                        .startMonoNs = kStart,
                        .callTimeout = milliseconds(1000),
                        .slots = &slots});
  f.beat(0);
  CHECK(m.check(kStart + 400 * kMs).empty());
  CHECK(m.watched() == 0);
  // Initial rank 2 joined at +500 ms: its heartbeat is watched, but missing
  // only once 300 ms have passed since it joined (not since this monitor began).
  slots = 3;
  CHECK(m.check(kStart + 500 * kMs).empty());
  CHECK(m.watched() == 2);
  CHECK(m.check(kStart + 799 * kMs).empty());
  CHECK(m.check(kStart + 800 * kMs) == std::vector<int>{2});
}

TEST_CASE("a restarted store gives every heartbeat its grace again", "[monitor][sibling]") {
  Fixture f;
  std::atomic<uint64_t> restarts{0};
  rm::SiblingMonitor m(f.store, f.keys,
                       {.self = 0,
                        .worldSize = 2,
                        .heartbeatTimeout = milliseconds(300),
                        .startMonoNs = kStart,
                        .callTimeout = milliseconds(1000),
                        .storeRestarts = &restarts});
  f.beat(1);
  CHECK(m.check(kStart + 10 * kMs).empty());
  f.stop(1);  // the store came back empty
  restarts = 1;
  CHECK(m.check(kStart + 20 * kMs).empty());
  CHECK(m.check(kStart + 319 * kMs).empty());
  f.beat(1);  // its monitor beat again
  CHECK(m.check(kStart + 330 * kMs).empty());
}
