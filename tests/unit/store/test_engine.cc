// StoreEngine: the rules shared by the memory store and the TCP server.
#include <catch2/catch.hpp>

#include "store/engine.h"

using namespace resilient::store;

namespace {

struct Recorder {
  std::vector<Completion> got;
  StoreEngine engine{[this](const Completion& c) { got.push_back(c); }};
};

}  // namespace

TEST_CASE("engine: a wait completes when its last key appears", "[store][engine]") {
  Recorder r;
  r.engine.set("a", "1");
  CHECK(r.engine.wait({"a"}, 1, 10) == 0);  // nothing pending
  const uint64_t id = r.engine.wait({"a", "b", "c", "b"}, 1, 11);
  REQUIRE(id != 0);
  r.engine.set("b", "1");
  CHECK(r.got.empty());
  r.engine.add("c", 1);
  REQUIRE(r.got.size() == 1);
  CHECK(r.got[0].kind == Completion::Kind::kWaitReady);
  CHECK(r.got[0].owner == 1);
  CHECK(r.got[0].tag == 11);
  CHECK_FALSE(r.engine.pending(id));
  r.engine.expire(id);  // already answered: nothing more
  CHECK(r.got.size() == 1);
}

TEST_CASE("engine: expire names what is missing; dropOwner forgets silently", "[store][engine]") {
  Recorder r;
  const uint64_t w = r.engine.wait({"x", "y"}, 7, 1);
  r.engine.set("x", "1");
  r.engine.expire(w);
  REQUIRE(r.got.size() == 1);
  CHECK(r.got[0].kind == Completion::Kind::kWaitTimeout);
  CHECK(r.got[0].missingKeys == std::vector<std::string>{"y"});

  const uint64_t w2 = r.engine.wait({"z"}, 8, 2);
  BarrierOutcome b = r.engine.barrier({"bar", 0, 0, 2, true}, 8, 3);
  REQUIRE(b.kind == BarrierOutcome::Kind::kPending);
  CHECK(r.engine.pendingCount() == 2);
  r.engine.dropOwner(8);
  CHECK(r.engine.pendingCount() == 0);
  CHECK_FALSE(r.engine.pending(w2));
  r.engine.set("z", "1");
  CHECK(r.got.size() == 1);
  // The dropped waiter's arrival still counts: rank 1 completes the barrier.
  BarrierOutcome last = r.engine.barrier({"bar", 0, 1, 2, true}, 9, 4);
  CHECK(last.kind == BarrierOutcome::Kind::kDone);
  CHECK(last.result.completed);
  CHECK(last.result.arrivalIndex == 2);
}

TEST_CASE("engine: barrier release answers every waiter at once", "[store][engine]") {
  Recorder r;
  constexpr int kRanks = 1000;
  for (int rank = 0; rank < kRanks - 1; ++rank) {
    BarrierOutcome o = r.engine.barrier({"big", 3, rank, kRanks, true}, rank + 100, 1);
    REQUIRE(o.kind == BarrierOutcome::Kind::kPending);
  }
  CHECK(r.got.empty());
  BarrierOutcome o = r.engine.barrier({"big", 3, kRanks - 1, kRanks, true}, 1, 1);
  CHECK(o.kind == BarrierOutcome::Kind::kDone);
  CHECK(o.result.arrivalIndex == kRanks);
  REQUIRE(r.got.size() == kRanks - 1);
  for (const auto& c : r.got) {
    CHECK(c.kind == Completion::Kind::kBarrierReleased);
    CHECK(c.result.arrived == kRanks);
  }
  CHECK(r.engine.pendingCount() == 0);
}

TEST_CASE("engine: several ranks counted in one step; their one waiter released once",
          "[store][engine]") {
  Recorder r;
  const auto several = [](std::vector<int> ranks, bool wait, int world = 8) {
    BarrierArrival a{"node", 0, 0, world, wait};
    a.ranks = std::move(ranks);
    return a;
  };
  // A node's agent waits for ranks 0-3 (2 twice): one pending call.
  BarrierOutcome agent = r.engine.barrier(several({0, 1, 2, 2, 3}, true), 1, 10);
  REQUIRE(agent.kind == BarrierOutcome::Kind::kPending);
  CHECK(agent.result.arrivalIndex == 1);
  CHECK(agent.result.arrived == 4);
  CHECK(r.engine.pendingCount() == 1);
  // Another world size: refused before anything is counted.
  CHECK(r.engine.barrier(several({4, 5}, false, 9), 2, 20).kind == BarrierOutcome::Kind::kMismatch);
  // A single arrival of rank 5, then a mark of 3-5 (3 and 5 counted before).
  BarrierOutcome one = r.engine.barrier({"node", 0, 5, 8, false}, 2, 21);
  CHECK(one.result.arrivalIndex == 5);
  BarrierOutcome mark = r.engine.barrier(several({5, 4, 3}, false), 2, 22);
  CHECK(mark.kind == BarrierOutcome::Kind::kDone);
  CHECK(mark.result.arrivalIndex == 6);  // rank 4, the one this call counted
  CHECK(mark.result.arrived == 6);
  // The other node's ranks 6, 7 and a surplus rank: counted, the barrier
  // completes (its waiter is released), and the call overflows.
  BarrierOutcome last = r.engine.barrier(several({6, 8, 7}, true), 3, 30);
  CHECK(last.kind == BarrierOutcome::Kind::kOverflow);
  CHECK(last.report.surplusRanks == std::vector<int>{8});
  CHECK(last.report.arrived == 8);
  REQUIRE(r.got.size() == 1);  // one answer for the agent's four ranks
  CHECK(r.got[0].kind == Completion::Kind::kBarrierReleased);
  CHECK(r.got[0].tag == 10);
  CHECK(r.got[0].result.arrivalIndex == 1);
  CHECK(r.got[0].result.arrived == 8);
  CHECK(r.engine.pendingCount() == 0);
  // Complete: an arrival of any of them counts nothing and does not wait.
  BarrierOutcome late = r.engine.barrier(several({0, 1}, true), 4, 40);
  CHECK(late.kind == BarrierOutcome::Kind::kDone);
  CHECK(late.result.completed);
  CHECK(late.result.arrivalIndex == 0);
}

TEST_CASE("engine: a release sink gets the waiters in arrival order; reap forgets them",
          "[store][engine]") {
  std::vector<Completion> notified;
  std::vector<BarrierWaiter> released;
  uint32_t releasedArrived = 0;
  int releases = 0;
  StoreEngine engine([&](const Completion& c) { notified.push_back(c); },
                     [&](const std::vector<BarrierWaiter>& waiters, uint32_t arrived) {
                       released = waiters;
                       releasedArrived = arrived;
                       ++releases;
                     });
  std::vector<uint64_t> ids;
  for (int rank = 3; rank >= 1; --rank) {  // ranks 3, 2, 1 wait; rank 0 completes
    BarrierOutcome o = engine.barrier({"sink", 0, rank, 4, true}, 100 + rank, 10 + rank);
    REQUIRE(o.kind == BarrierOutcome::Kind::kPending);
    ids.push_back(o.pendingId);
  }
  BarrierOutcome last = engine.barrier({"sink", 0, 0, 4, true}, 100, 10);
  CHECK(last.kind == BarrierOutcome::Kind::kDone);
  CHECK(notified.empty());
  REQUIRE(releases == 1);
  CHECK(releasedArrived == 4);
  REQUIRE(released.size() == 3);
  for (size_t i = 0; i < released.size(); ++i) {
    CHECK(released[i].id == ids[i]);
    CHECK(released[i].owner == 103 - i);
    CHECK(released[i].tag == 13 - i);
    CHECK(released[i].arrivalIndex == i + 1);
  }
  // Answered, though not yet reaped: a timeout or a disconnect of one of
  // them must not answer it a second time.
  engine.expire(ids[0]);
  engine.dropOwner(102);
  CHECK(notified.empty());
  CHECK(engine.pendingCount() == 0);
  // A wait registered after the release is still answered normally.
  const uint64_t w = engine.wait({"k"}, 7, 70);
  engine.reap();
  CHECK(engine.pending(w));
  engine.set("k", "v");
  REQUIRE(notified.size() == 1);
  CHECK(notified[0].tag == 70);
}

TEST_CASE("engine: old barrier generations are collected; arrivals there are stale",
          "[store][engine]") {
  Recorder r;
  for (uint64_t gen = 0; gen < 10; ++gen) {
    CHECK(r.engine.barrier({"g", gen, 0, 1, true}, 1, 1).result.completed);
  }
  // Recent completed generations still answer "complete" ...
  BarrierOutcome recent = r.engine.barrier({"g", 8, 0, 1, true}, 1, 2);
  CHECK(recent.kind == BarrierOutcome::Kind::kDone);
  CHECK(recent.result.arrivalIndex == 0);
  // ... old ones are forgotten and said so, rather than waited on forever.
  CHECK(r.engine.barrier({"g", 1, 0, 1, true}, 1, 3).kind == BarrierOutcome::Kind::kStale);
  // Other names are independent.
  CHECK(r.engine.barrier({"h", 1, 0, 1, true}, 1, 4).kind == BarrierOutcome::Kind::kDone);
}

TEST_CASE("engine: removePrefix drops keys and barriers, answering their waiters",
          "[store][engine]") {
  Recorder r;
  r.engine.set("iter/1/a", "1");
  r.engine.set("iter/2/a", "1");
  BarrierOutcome b = r.engine.barrier({"iter/1/bar", 0, 0, 2, true}, 5, 9);
  REQUIRE(b.kind == BarrierOutcome::Kind::kPending);
  CHECK(r.engine.removePrefix("iter/1/") == 1);
  REQUIRE(r.got.size() == 1);
  CHECK(r.got[0].kind == Completion::Kind::kDropped);
  CHECK(r.got[0].tag == 9);
  CHECK(r.engine.find("iter/2/a") != nullptr);
  // A new barrier of the same name starts from scratch.
  BarrierOutcome fresh = r.engine.barrier({"iter/1/bar", 0, 1, 2, false}, 5, 10);
  CHECK(fresh.result.arrivalIndex == 1);
}

TEST_CASE("engine: keys expire in order; a plain set cancels the expiry", "[store][engine]") {
  Recorder r;
  const TimePoint t0 = SteadyClock::now();
  r.engine.set("a", "1", t0 + std::chrono::seconds(1));
  r.engine.set("b", "1", t0 + std::chrono::seconds(2));
  r.engine.set("c", "1", t0 + std::chrono::seconds(1));
  r.engine.set("c", "2");  // permanent now
  REQUIRE(r.engine.nextKeyExpiry().has_value());
  CHECK(*r.engine.nextKeyExpiry() == t0 + std::chrono::seconds(1));
  r.engine.expireKeys(t0 + std::chrono::milliseconds(999));
  CHECK(r.engine.size() == 3);
  r.engine.expireKeys(t0 + std::chrono::seconds(1));
  CHECK(r.engine.find("a") == nullptr);
  CHECK(r.engine.find("b") != nullptr);
  CHECK(r.engine.find("c") != nullptr);
  r.engine.expireKeys(t0 + std::chrono::seconds(5));
  CHECK(r.engine.find("b") == nullptr);
  CHECK(r.engine.size() == 1);
  CHECK_FALSE(r.engine.nextKeyExpiry().has_value());
}
