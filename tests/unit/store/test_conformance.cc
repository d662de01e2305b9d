// The store conformance suite: every case runs against every backend the
// binary registered (memory, tcp and lazy-tcp in test-store, etcd 1- and 3-member
// clusters in test-store-etcd). Each case works under its own key prefix.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "store/barrier.h"
#include "store/errors.h"
#include "store/prefix_view.h"
#include "tests/unit/store/backends.h"
#include "tests/unit/store/store_test_util.h"

using namespace resilient::store;
using resilient::test::Expectations;
using resilient::test::runThreads;
using resilient::test::StoreContext;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string backendUnderTest() {
  return GENERATE(from_range(resilient::test::backendNames()));
}

}  // namespace

TEST_CASE("set, get, overwrite and absent keys", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  CHECK_FALSE(s.get("missing").has_value());
  s.set("a", "1");
  CHECK(s.get("a") == std::optional<std::string>("1"));
  s.set("a", "two");
  CHECK(s.get("a") == std::optional<std::string>("two"));
  // Values are bytes: NULs and high bytes survive; an empty value is a value.
  const std::string binary("x\0y\xff\x01", 5);
  s.set("bin", binary);
  CHECK(s.get("bin") == std::optional<std::string>(binary));
  s.set("empty", "");
  CHECK(s.get("empty") == std::optional<std::string>(""));
  CHECK(s.exists("empty"));
  // Keys with odd bytes too.
  s.set(std::string("k\0/\xfe", 4), "odd");
  CHECK(s.get(std::string("k\0/\xfe", 4)) == std::optional<std::string>("odd"));
}

TEST_CASE("limits: key and value sizes", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  // The prefix counts towards the key limit.
  const std::string longKey(kMaxKeyBytes - ctx.prefix().size(), 'k');
  s.set(longKey, "v");
  CHECK(s.get(longKey) == std::optional<std::string>("v"));
  CHECK_THROWS_AS(s.set(longKey + "k", "v"), InvalidArgument);
  CHECK_THROWS_AS(s.set("", "v"), InvalidArgument);
  const std::string big(size_t{256} * 1024, 'v');
  s.set("big", big);
  CHECK(s.get("big") == std::optional<std::string>(big));
  CHECK_THROWS_AS(s.set("huge", std::string(kMaxValueBytes + 1, 'v')), InvalidArgument);
  CHECK_FALSE(s.exists("huge"));
}

TEST_CASE("add is an atomic counter", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  CHECK(s.add("c", 5) == 5);
  CHECK(s.add("c", -7) == -2);
  CHECK(s.get("c") == std::optional<std::string>("-2"));
  CHECK(s.add("c", 0) == -2);
  s.set("text", "hello");
  CHECK_THROWS_AS(s.add("text", 1), InvalidArgument);
  CHECK(s.get("text") == std::optional<std::string>("hello"));
  s.set("max", std::to_string(INT64_MAX));
  CHECK_THROWS_AS(s.add("max", 1), InvalidArgument);

  // Concurrent adds from several clients lose nothing.
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::shared_ptr<Store>> clients;
  clients.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    clients.push_back(ctx.client());
  }
  std::vector<std::vector<int64_t>> seen(kThreads);
  runThreads(kThreads, [&](int t) {
    for (int i = 0; i < kEach; ++i) {
      seen[static_cast<size_t>(t)].push_back(clients[static_cast<size_t>(t)]->add("shared", 1));
    }
  });
  CHECK(s.add("shared", 0) == int64_t{kThreads} * kEach);
  // Every intermediate value was handed out exactly once.
  std::set<int64_t> all;
  for (const auto& v : seen) {
    all.insert(v.begin(), v.end());
  }
  CHECK(all.size() == static_cast<size_t>(kThreads * kEach));
  CHECK(*all.begin() == 1);
  CHECK(*all.rbegin() == int64_t{kThreads} * kEach);
}

TEST_CASE("compareSet swaps only on a match and reports the current value",
          "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  // Expecting absence on an absent key: swapped.
  CasResult r = s.compareSet("k", std::nullopt, "first");
  CHECK(r.swapped);
  CHECK(r.current == std::optional<std::string>("first"));
  // Expecting absence on a present key: not swapped, the value is reported.
  r = s.compareSet("k", std::nullopt, "second");
  CHECK_FALSE(r.swapped);
  CHECK(r.current == std::optional<std::string>("first"));
  // Wrong expectation.
  r = s.compareSet("k", std::string_view("nope"), "second");
  CHECK_FALSE(r.swapped);
  CHECK(r.current == std::optional<std::string>("first"));
  // Right expectation.
  r = s.compareSet("k", std::string_view("first"), "second");
  CHECK(r.swapped);
  CHECK(s.get("k") == std::optional<std::string>("second"));
  // Expecting a value on an absent key: not swapped, and it says absent.
  r = s.compareSet("absent", std::string_view("x"), "y");
  CHECK_FALSE(r.swapped);
  CHECK_FALSE(r.current.has_value());
  CHECK_FALSE(s.exists("absent"));

  // A race to create the key: exactly one client wins.
  constexpr int kThreads = 4;
  std::vector<std::shared_ptr<Store>> clients;
  clients.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    clients.push_back(ctx.client());
  }
  std::atomic<int> winners{0};
  Expectations e;
  runThreads(kThreads, [&](int t) {
    CasResult mine =
        clients[static_cast<size_t>(t)]->compareSet("leader", std::nullopt, std::to_string(t));
    if (mine.swapped) {
      ++winners;
    }
    e.expect(mine.current.has_value(), "thread " + std::to_string(t) + ": no current value");
  });
  CHECK(e.failures().empty());
  CHECK(winners == 1);
}

TEST_CASE("multiGet and multiSet", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  s.multiSet({{"a", "1"}, {"b", "2"}, {"c", "3"}});
  const auto v = s.multiGet({"c", "missing", "a", "b", "a"});
  REQUIRE(v.size() == 5);
  CHECK(v[0] == std::optional<std::string>("3"));
  CHECK_FALSE(v[1].has_value());
  CHECK(v[2] == std::optional<std::string>("1"));
  CHECK(v[3] == std::optional<std::string>("2"));
  CHECK(v[4] == std::optional<std::string>("1"));
  CHECK(s.multiGet({}).empty());
  s.multiSet({});
  // A key named twice keeps its last value (etcd: put once in the transaction).
  s.multiSet({{"a", "first"}, {"d", "4"}, {"a", "last"}});
  CHECK(s.multiGet({"a", "d"}) ==
        std::vector<std::optional<std::string>>{std::string("last"), std::string("4")});

  // More keys than one atomic batch.
  std::vector<KeyValue> many;
  std::vector<std::string> keys;
  many.reserve(300);
  keys.reserve(300);
  for (int i = 0; i < 300; ++i) {
    many.emplace_back("m" + std::to_string(i), std::to_string(i * i));
    keys.push_back("m" + std::to_string(i));
  }
  s.multiSet(many);
  const auto got = s.multiGet(keys);
  REQUIRE(got.size() == keys.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == std::optional<std::string>(many[i].second));
  }
}

TEST_CASE("remove, check, exists and removePrefix", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  s.set("x", "1");
  s.set("y", "2");
  CHECK(s.check({"x", "y"}));
  CHECK_FALSE(s.check({"x", "y", "z"}));
  CHECK(s.check({}));
  CHECK(s.remove("x"));
  CHECK_FALSE(s.remove("x"));
  CHECK_FALSE(s.exists("x"));
  CHECK(s.exists("y"));

  s.multiSet({{"epoch/1/a", "a"}, {"epoch/1/b", "b"}, {"epoch/10/a", "c"}, {"epoch/2/a", "d"}});
  CHECK(s.removePrefix("epoch/1/") == 2);
  CHECK_FALSE(s.exists("epoch/1/a"));
  CHECK(s.exists("epoch/10/a"));
  CHECK(s.exists("epoch/2/a"));
  CHECK(s.removePrefix("nothing/") == 0);
  CHECK(s.removePrefix("") == 3);  // the whole test prefix: y, epoch/10/a, epoch/2/a
  CHECK_FALSE(s.exists("y"));
}

TEST_CASE("wait returns when the keys exist, woken by another client", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();

  s.set("present", "1");
  s.wait({"present"}, milliseconds(5000));  // already there
  s.wait({}, milliseconds(10));

  auto waiterClient = ctx.client();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    waiterClient->set("armed", "1");
    waiterClient->wait({"k1", "k2"}, milliseconds(20000));
    returned = true;
  });
  s.wait({"armed"}, milliseconds(20000));
  s.set("k1", "v");
  CHECK_FALSE(returned.load());  // k2 is still missing
  s.set("k2", "v");
  waiter.join();
  CHECK(returned.load());
}

TEST_CASE("a waiting thread does not hold up the client's other calls", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto shared = ctx.client();  // one client, two threads
  std::thread waiter([&] { shared->wait({"go"}, milliseconds(20000)); });
  // These go over the same client while the waiter is blocked.
  shared->set("other", "1");
  CHECK(shared->get("other") == std::optional<std::string>("1"));
  shared->set("go", "1");
  waiter.join();
}

TEST_CASE("wait times out naming the missing keys", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  s.set("here", "1");
  const auto start = Clock::now();
  try {
    s.wait({"here", "gone1", "gone2"}, milliseconds(300));
    FAIL("wait returned although keys are missing");
  } catch (const TimeoutError& e) {
    CHECK(e.code() == StoreErrc::kTimeout);
    std::vector<std::string> missing = e.missingKeys();
    std::sort(missing.begin(), missing.end());
    CHECK(missing == std::vector<std::string>{"gone1", "gone2"});
    CHECK(std::string(e.what()).find("gone1") != std::string::npos);
  }
  const auto took = Clock::now() - start;
  CHECK(took >= milliseconds(300));
  CHECK(took < milliseconds(10000));  // generous: the bound is the feature
  // Timeout 0: a pure check.
  CHECK_THROWS_AS(s.wait({"gone1"}, milliseconds(0)), TimeoutError);
}

TEST_CASE("a deadline scope cuts every call of its thread, default timeouts included",
          "[store][conformance]") {
  // Issue 19 finding 1: a barrier's reads used the store's default timeout
  // (300 s), not the barrier's deadline.
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  const auto start = Clock::now();
  {
    const DeadlineScope outer(Clock::now() + milliseconds(5000));
    const DeadlineScope inner(Clock::now() + milliseconds(300));  // the earliest wins
    CHECK_THROWS_AS(s.wait({"never"}), TimeoutError);             // the store's default
    CHECK_THROWS_AS(s.wait({"never"}, milliseconds(60000)), TimeoutError);
  }
  const auto took = Clock::now() - start;
  CHECK(took >= milliseconds(300));
  CHECK(took < milliseconds(5000));
  CHECK_FALSE(DeadlineScope::current());  // closed with its scope
}

TEST_CASE("waitGet returns the value once it is set", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto other = ctx.client();
  std::thread setter([&] {
    other->wait({"want"}, milliseconds(20000));
    other->set("value", "42");
  });
  ctx.store().set("want", "1");
  CHECK(ctx.store().waitGet("value", milliseconds(20000)) == "42");
  setter.join();
}

TEST_CASE("setExpiring keys disappear after their ttl; a plain set keeps them",
          "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  // etcd rounds lease TTLs up to whole seconds (and has a minimum), so the
  // TTL is 2 s and the bound for disappearing is generous.
  s.setExpiring("hb", "first", milliseconds(2000));
  s.setExpiring("hb", "alive", milliseconds(2000));  // a refresh keeps the key
  s.setExpiring("kept", "x", milliseconds(2000));
  s.set("kept", "now permanent");
  CHECK(s.get("hb") == std::optional<std::string>("alive"));
  const auto start = Clock::now();
  while (s.exists("hb") && Clock::now() - start < std::chrono::seconds(15)) {
    std::this_thread::sleep_for(milliseconds(100));  // polling for the expiry itself
  }
  const auto took = Clock::now() - start;
  CHECK_FALSE(s.exists("hb"));
  CHECK(took >= milliseconds(1000));
  CHECK(s.get("kept") == std::optional<std::string>("now permanent"));
}

TEST_CASE("barrier: every rank released once all arrived, generations in step",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  constexpr int kRanks = 5;
  constexpr int kRounds = 3;
  std::vector<std::shared_ptr<Store>> clients;
  clients.reserve(kRanks);
  for (int i = 0; i < kRanks; ++i) {
    clients.push_back(ctx.client());
  }
  std::vector<std::vector<uint32_t>> indices(kRounds, std::vector<uint32_t>(kRanks));
  std::atomic<int> passed[kRounds] = {};
  Expectations e;
  runThreads(kRanks, [&](int rank) {
    Barrier b(*clients[static_cast<size_t>(rank)], "step", kRanks);
    for (int round = 0; round < kRounds; ++round) {
      // Nobody passes round r before everyone reached it.
      passed[round]++;
      BarrierResult r = b.arriveAndWait(rank, milliseconds(20000));
      const std::string where = "rank " + std::to_string(rank) + " round " + std::to_string(round);
      e.expect(passed[round].load() == kRanks, where + ": passed before all arrived");
      e.expect(r.completed, where + ": not completed");
      e.expect(r.arrived == static_cast<uint32_t>(kRanks),
               where + ": arrived " + std::to_string(r.arrived));
      indices[static_cast<size_t>(round)][static_cast<size_t>(rank)] = r.arrivalIndex;
    }
    e.expect(b.generation() == kRounds,
             "rank " + std::to_string(rank) + ": generation " + std::to_string(b.generation()));
  });
  CHECK(e.failures().empty());
  for (auto& round : indices) {
    std::sort(round.begin(), round.end());
    CHECK(round == std::vector<uint32_t>{1, 2, 3, 4, 5});
  }
}

TEST_CASE("barrier: re-entrant, a third party counts a dead rank",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto monitor = ctx.client();
  auto r0 = ctx.client();
  auto r1 = ctx.client();
  std::atomic<bool> done0{false};
  std::atomic<bool> done1{false};
  std::thread t0([&] {
    done0 = r0->barrier({"iter", 7, 0, 3, true}, milliseconds(20000)).completed;
  });
  std::thread t1([&] {
    done1 = r1->barrier({"iter", 7, 1, 3, true}, milliseconds(20000)).completed;
  });
  // Rank 2 died: its monitor counts it without waiting.
  BarrierResult marked = monitor->barrier({"iter", 7, 2, 3, false}, milliseconds(20000));
  CHECK(marked.arrivalIndex >= 1);
  t0.join();
  t1.join();
  CHECK(done0);
  CHECK(done1);
  // Counting a rank twice changes nothing; a late arrival passes at once.
  BarrierResult again = monitor->barrier({"iter", 7, 2, 3, false}, milliseconds(5000));
  CHECK(again.completed);
  CHECK(again.arrivalIndex == 0);
  BarrierResult late = r0->barrier({"iter", 7, 0, 3, true}, milliseconds(5000));
  CHECK(late.completed);
  CHECK(late.arrivalIndex == 0);
}

TEST_CASE("barrier: timeout names the missing ranks", "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  auto other = ctx.client();
  other->barrier({"b", 0, 1, 4, false});  // rank 1 counted, does not wait
  const auto start = Clock::now();
  try {
    s.barrier({"b", 0, 0, 4, true}, milliseconds(400));
    FAIL("barrier released with ranks missing");
  } catch (const BarrierTimeout& e) {
    CHECK(e.code() == StoreErrc::kBarrierTimeout);
    CHECK(e.missingRanks() == std::vector<int>{2, 3});
    CHECK(e.report().arrived == 2);
    CHECK(e.report().worldSize == 4);
    CHECK(std::string(e.what()).find("missing ranks 2-3") != std::string::npos);
  }
  const auto took = Clock::now() - start;
  CHECK(took >= milliseconds(400));
  CHECK(took < milliseconds(10000));
  // A BarrierTimeout is a TimeoutError.
  CHECK_THROWS_AS(s.barrier({"b", 0, 0, 4, true}, milliseconds(50)), TimeoutError);
}

TEST_CASE("barrier: overflow names the surplus rank; a size mismatch is refused",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  s.barrier({"o", 0, 0, 2, false});
  try {
    s.barrier({"o", 0, 2, 2, true}, milliseconds(5000));
    FAIL("rank 2 joined a barrier of 2");
  } catch (const BarrierOverflow& e) {
    CHECK(e.surplusRanks() == std::vector<int>{2});
    CHECK(std::string(e.what()).find("surplus rank 2") != std::string::npos);
  }
  CHECK_THROWS_AS(s.barrier({"o", 0, -1, 2, false}), BarrierOverflow);
  CHECK_THROWS_AS(s.barrier({"o", 0, 1, 3, false}), InvalidArgument);
  CHECK_THROWS_AS(s.barrier({"o", 0, 0, 0, false}), InvalidArgument);
  // The barrier itself is unharmed: rank 1 completes it.
  CHECK(s.barrier({"o", 0, 1, 2, true}, milliseconds(5000)).completed);
}

TEST_CASE("barrier: one arrival counts several ranks (a node's agent)",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto agent = ctx.client();
  auto other = ctx.client();
  BarrierArrival node{"n", 0, 0, 6, false};
  node.ranks = {0, 1, 2, 3};
  const BarrierResult first = agent->barrier(node, milliseconds(5000));
  CHECK_FALSE(first.completed);
  CHECK(first.arrived == 4);
  CHECK(first.arrivalIndex == 1);
  // Again (a retry): nothing new is counted.
  const BarrierResult again = agent->barrier(node, milliseconds(5000));
  CHECK(again.arrivalIndex == 0);
  CHECK(again.arrived == 4);
  // A waiter among them is released by the last single arrival.
  std::atomic<bool> released{false};
  std::thread waiter([&] {
    BarrierArrival w{"n", 0, 2, 6, true};
    w.ranks = {2, 4};  // 2 counted already, 4 new
    const BarrierResult r = agent->barrier(w, milliseconds(20000));
    released = r.completed && r.arrived == 6;
  });
  std::this_thread::sleep_for(milliseconds(200));
  CHECK_FALSE(released);
  const BarrierResult last = other->barrier({"n", 0, 5, 6, true}, milliseconds(20000));
  waiter.join();
  CHECK(last.completed);
  CHECK(released);

  // Surplus ranks in the set: the others are counted, the call overflows.
  BarrierArrival mixed{"m", 0, 0, 3, false};
  mixed.ranks = {0, 7, 1};
  try {
    agent->barrier(mixed, milliseconds(5000));
    FAIL("ranks 0, 7, 1 joined a barrier of 3");
  } catch (const BarrierOverflow& e) {
    CHECK(e.surplusRanks() == std::vector<int>{7});
  }
  CHECK(other->barrier({"m", 0, 2, 3, true}, milliseconds(5000)).completed);

  // More ranks than one etcd transaction may count.
  BarrierArrival wide{"w", 0, 0, 300, true};
  for (int r = 0; r < 300; ++r) {
    wide.ranks.push_back(r);
  }
  const BarrierResult all = agent->barrier(wide, milliseconds(20000));
  CHECK(all.completed);
  CHECK(all.arrivalIndex == 1);
}

TEST_CASE("barrier: several ranks in one arrival mixed with single arrivals of the same ranks",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto agent = ctx.client();
  auto other = ctx.client();
  const auto ranksArrival = [](std::vector<int> ranks, int world, bool wait) {
    BarrierArrival a{"x", 0, 0, world, wait};
    a.ranks = std::move(ranks);
    return a;
  };
  // Rank 1 arrives alone, then the node's agent for 0, 1, 2: the index is
  // that of rank 0, the first rank this call counted; waitForRelease=false
  // returns at once.
  BarrierResult r = other->barrier({"x", 0, 1, 6, false}, milliseconds(5000));
  CHECK(r.arrivalIndex == 1);
  CHECK(r.arrived == 1);
  const auto start = Clock::now();
  r = agent->barrier(ranksArrival({0, 1, 2}, 6, false), milliseconds(20000));
  CHECK(Clock::now() - start < milliseconds(5000));
  CHECK_FALSE(r.completed);
  CHECK(r.arrivalIndex == 2);
  CHECK(r.arrived == 3);
  // Counted once: the same ranks again, in another order, count nothing.
  r = agent->barrier(ranksArrival({2, 1}, 6, false), milliseconds(5000));
  CHECK(r.arrivalIndex == 0);
  CHECK(r.arrived == 3);
  // A rank named twice in one arrival is counted once.
  r = agent->barrier(ranksArrival({3, 3}, 6, false), milliseconds(5000));
  CHECK(r.arrivalIndex == 4);
  CHECK(r.arrived == 4);
  // Another world size is refused, and counts none of the ranks.
  CHECK_THROWS_AS(agent->barrier(ranksArrival({4, 5}, 7, false), milliseconds(5000)),
                  InvalidArgument);
  r = other->barrier({"x", 0, 0, 6, false}, milliseconds(5000));
  CHECK(r.arrivalIndex == 0);
  CHECK(r.arrived == 4);
  // A waiter for ranks 4 and 0 (0 counted already) is released, once, by the
  // last single arrival.
  std::atomic<int> answers{0};
  BarrierResult waited;
  std::thread waiter([&] {
    waited = agent->barrier(ranksArrival({4, 0}, 6, true), milliseconds(20000));
    ++answers;
  });
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(answers.load() == 0);
  const BarrierResult last = other->barrier({"x", 0, 5, 6, true}, milliseconds(20000));
  waiter.join();
  CHECK(answers.load() == 1);
  CHECK(last.completed);
  CHECK(last.arrivalIndex == 6);
  CHECK(waited.completed);
  CHECK(waited.arrivalIndex == 5);
  CHECK(waited.arrived == 6);
  // After completion every arrival returns at once, counting nothing.
  r = agent->barrier(ranksArrival({0, 1, 2, 3, 4, 5}, 6, true), milliseconds(5000));
  CHECK(r.completed);
  CHECK(r.arrivalIndex == 0);
  CHECK(r.arrived == 6);
}

TEST_CASE("barrier: surplus ranks in a several-rank arrival overflow after the others are counted",
          "[store][conformance][barrier]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  BarrierArrival mixed{"s", 0, 0, 3, true};
  mixed.ranks = {0, -3, 9, 1};
  try {
    s.barrier(mixed, milliseconds(5000));
    FAIL("ranks -3 and 9 joined a barrier of 3");
  } catch (const BarrierOverflow& e) {
    CHECK(e.surplusRanks() == std::vector<int>{-3, 9});
    CHECK(e.report().arrived == 2);
    CHECK(e.report().missingRanks == std::vector<int>{2});
  }
  // Ranks 0 and 1 were counted: rank 2 completes the barrier.
  const BarrierResult last = s.barrier({"s", 0, 2, 3, true}, milliseconds(5000));
  CHECK(last.completed);
  CHECK(last.arrivalIndex == 3);
  // Only surplus ranks: nothing to count, the call overflows.
  BarrierArrival none{"t", 0, 0, 2, false};
  none.ranks = {2, 5};
  try {
    s.barrier(none, milliseconds(5000));
    FAIL("ranks 2 and 5 joined a barrier of 2");
  } catch (const BarrierOverflow& e) {
    CHECK(e.surplusRanks() == std::vector<int>{2, 5});
  }
}

TEST_CASE("setExpiringMany: every key with one expiry", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  s.setExpiringMany({}, milliseconds(2000));  // nothing to do
  s.setExpiringMany({{"hb/0", "a"}, {"hb/1", "b"}, {"kept", "c"}}, milliseconds(2000));
  s.set("kept", "permanent");
  CHECK(s.multiGet({"hb/0", "hb/1"}) ==
        std::vector<std::optional<std::string>>{std::string("a"), std::string("b")});
  const auto start = Clock::now();
  while ((s.exists("hb/0") || s.exists("hb/1")) && Clock::now() - start < std::chrono::seconds(15)) {
    std::this_thread::sleep_for(milliseconds(100));  // polling for the expiry itself
  }
  CHECK_FALSE(s.exists("hb/0"));
  CHECK_FALSE(s.exists("hb/1"));
  CHECK(Clock::now() - start >= milliseconds(1000));
  CHECK(s.get("kept") == std::optional<std::string>("permanent"));
  CHECK_THROWS_AS(s.setExpiringMany({{"", "x"}}, milliseconds(1000)), InvalidArgument);
}

TEST_CASE("setExpiringMany: a key set again keeps living, the others of its batch expire",
          "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  Store& s = ctx.store();
  s.setExpiringMany({{"a", "1"}, {"b", "1"}, {"c", "1"}}, milliseconds(2000));
  // Later batches and single writes of some of the keys: the others keep
  // their expiry, none is removed early.
  s.setExpiringMany({{"a", "2"}}, milliseconds(2000));
  s.setExpiring("c", "2", milliseconds(2000));
  CHECK(s.multiGet({"a", "b", "c"}) == std::vector<std::optional<std::string>>{
                                           std::string("2"), std::string("1"), std::string("2")});
  // A key named twice: the last value wins, as with setExpiring of each.
  s.setExpiringMany({{"d", "first"}, {"d", "last"}}, milliseconds(2000));
  CHECK(s.get("d") == std::optional<std::string>("last"));
  // `a` is refreshed by batches, `c` by setExpiring, while `b` and `d` expire.
  const auto start = Clock::now();
  while ((s.exists("b") || s.exists("d")) && Clock::now() - start < std::chrono::seconds(15)) {
    s.setExpiringMany({{"a", "3"}}, milliseconds(2000));
    s.setExpiring("c", "3", milliseconds(2000));
    std::this_thread::sleep_for(milliseconds(200));
  }
  CHECK(Clock::now() - start >= milliseconds(1000));
  CHECK_FALSE(s.exists("b"));
  CHECK_FALSE(s.exists("d"));
  CHECK(s.get("a") == std::optional<std::string>("3"));
  CHECK(s.get("c") == std::optional<std::string>("3"));
  // A batch larger than one etcd transaction: every key present.
  std::vector<KeyValue> many;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    many.emplace_back("many/" + std::to_string(i), std::to_string(i));
    keys.push_back(many.back().first);
  }
  s.setExpiringMany(many, milliseconds(5000));
  CHECK(s.check(keys));
  CHECK(s.get("many/299") == std::optional<std::string>("299"));
  // Oversized keys and values are refused before anything is written.
  CHECK_THROWS_AS(s.setExpiringMany({{"e", "x"}, {std::string(kMaxKeyBytes + 1, 'k'), "x"}},
                                    milliseconds(1000)),
                  InvalidArgument);
  CHECK_THROWS_AS(s.setExpiringMany({{"e", "x"}, {"f", std::string(kMaxValueBytes + 1, 'v')}},
                                    milliseconds(1000)),
                  InvalidArgument);
  CHECK_FALSE(s.exists("e"));
}

TEST_CASE("prefix views isolate keys and barriers", "[store][conformance]") {
  const std::string name = backendUnderTest();
  CAPTURE(name);
  StoreContext ctx(name);
  auto base = ctx.client();
  auto a = std::make_shared<PrefixView>(base, "a/");
  auto ab = std::make_shared<PrefixView>(a, "b/");
  a->set("k", "in a");
  ab->set("k", "in a/b");
  base->set("k", "in base");
  CHECK(a->get("k") == std::optional<std::string>("in a"));
  CHECK(ab->get("k") == std::optional<std::string>("in a/b"));
  CHECK(base->get("a/b/k") == std::optional<std::string>("in a/b"));
  try {
    ab->wait({"k", "nope"}, milliseconds(100));
    FAIL("wait passed");
  } catch (const TimeoutError& e) {
    CHECK(e.missingKeys() == std::vector<std::string>{"nope"});
  }
  CHECK(ab->removePrefix("") == 1);
  CHECK(a->exists("k"));
  CHECK_FALSE(base->exists("a/b/k"));
  // Barriers are named inside the view: "bar" of the view is "a/b/bar" below.
  CHECK(ab->barrier({"bar", 0, 0, 1, true}, milliseconds(5000)).completed);
  CHECK_FALSE(base->barrier({"bar", 0, 0, 2, false}, milliseconds(5000)).completed);
  CHECK_THROWS_AS(base->barrier({"a/b/bar", 0, 0, 2, false}, milliseconds(5000)), InvalidArgument);
}
