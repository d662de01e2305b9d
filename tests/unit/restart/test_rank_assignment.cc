// Rank assignment: each policy on hand-checked worlds, their composition,
// errors, and randomized fault rounds checked against the invariants.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/rank_assignment.hpp"
#include "tests/unit/restart/world_views.h"

using namespace resilient::restart;
using namespace resilient::restart::test;

namespace {

constexpr Mode A = Mode::kActive;
constexpr Mode I = Mode::kInactive;
constexpr Mode T = Mode::kTerminated;

}  // namespace

TEST_CASE("the first world is every rank active in its initial place", "[restart][assignment]") {
  const World w(4);
  CHECK(w.worldSize() == 4);
  CHECK(w.activeWorldSize() == 4);
  CHECK(ranksOf(w) == std::vector<int>{0, 1, 2, 3});
  CHECK(w.inconsistency().empty());
  CHECK_THROWS_AS(World(0), std::invalid_argument);
}

TEST_CASE("ShiftRanks slides the survivors down in order", "[restart][assignment]") {
  const World next = assign(World(8), defaultRankAssignment(), {2, 5});
  CHECK(ranksOf(next) == std::vector<int>{0, 1, -1, 2, 3, -1, 4, 5});
  CHECK(next.worldSize() == 6);
  CHECK(next.activeWorldSize() == 6);
  CHECK(next.at(6).activeRank == 4);
}

TEST_CASE("FillGaps keeps low ranks in place and moves the tail into the holes",
          "[restart][assignment]") {
  const World next = assign(World(8), compose({activateAllRanks(), fillGaps()}), {2, 5});
  CHECK(ranksOf(next) == std::vector<int>{0, 1, -1, 3, 4, -1, 2, 5});
  // A second round: the holes fill again from the new tail.
  const World again = assign(next, compose({activateAllRanks(), fillGaps()}), {0});
  CHECK(ranksOf(again) == std::vector<int>{-1, 1, -1, 3, 4, -1, 2, 0});
}

TEST_CASE("spares take the place of failed active ranks", "[restart][assignment]") {
  const auto policy = compose({maxActiveWorldSize(4), activateAllRanks(), shiftRanks()});
  const World first = assign(World(6), policy, {});
  CHECK(modesOf(first) == std::vector<Mode>{A, A, A, A, I, I});
  const World second = assign(first, policy, {1});
  CHECK(modesOf(second) == std::vector<Mode>{A, T, A, A, A, I});
  CHECK(second.at(4).rank == 3);
  CHECK(second.at(4).activeRank == 3);
  const World third = assign(second, policy, {0, 2, 3});
  CHECK(modesOf(third) == std::vector<Mode>{T, T, T, T, A, A});
  CHECK(third.activeWorldSize() == 2);
}

TEST_CASE("without ActivateAllRanks, modes carry over", "[restart][assignment]") {
  const World first = assign(World(4), compose({maxActiveWorldSize(2), shiftRanks()}), {});
  CHECK(modesOf(first) == std::vector<Mode>{A, A, I, I});
  const World second = assign(first, shiftRanks(), {0});
  CHECK(modesOf(second) == std::vector<Mode>{T, A, I, I});
  CHECK(second.activeWorldSize() == 1);
}

TEST_CASE("ActiveWorldSizeDivisibleBy makes the highest active ranks spares",
          "[restart][assignment]") {
  const auto policy = compose({activeWorldSizeDivisibleBy(4), activateAllRanks(), shiftRanks()});
  const World w = assign(World(10), policy, {});
  CHECK(w.activeWorldSize() == 8);
  CHECK(w.at(8).mode == I);
  CHECK(w.at(9).mode == I);
  const World after = assign(w, policy, {0, 1, 2});
  CHECK(after.worldSize() == 7);
  CHECK(after.activeWorldSize() == 4);
}

TEST_CASE("FilterCountGroupedByKey benches a host that lost a rank", "[restart][assignment]") {
  auto host = [](int initialRank) { return "host" + std::to_string(initialRank / 4); };
  const auto policy = compose({filterCountGroupedByKey([](int n) { return n == 4; }, "4 per host"),
                               activateAllRanks(), shiftRanks()});
  const World w = assign(World(16), policy, {5}, host);
  CHECK(w.worldSize() == 15);
  CHECK(w.activeWorldSize() == 12);
  for (int i : {4, 6, 7}) {
    CHECK(w.at(i).mode == I);
  }
  CHECK(w.at(8).activeRank == 4);
  CHECK_THROWS_WITH(assign(World(4), policy, {}), Catch::Contains("needs a key per rank"));
}

TEST_CASE("a policy that leaves holes, or a bad input, is a clear error", "[restart][assignment]") {
  CHECK_THROWS_WITH(assign(World(4), activateAllRanks(), {1}),
                    Catch::Contains("ActivateAllRanks left an inconsistent world") &&
                        Catch::Contains("outside [0, 3)"));
  CHECK_THROWS_WITH(assign(World(4), defaultRankAssignment(), {7}),
                    Catch::Contains("terminated rank 7 is not an initial rank of a 4-rank job"));
  CHECK_THROWS_AS(maxActiveWorldSize(0), std::invalid_argument);
  CHECK_THROWS_AS(activeWorldSizeDivisibleBy(0), std::invalid_argument);
  CHECK_THROWS_AS(compose({nullptr}), std::invalid_argument);
  CHECK(defaultRankAssignment()->describe() == "Compose(ActivateAllRanks, ShiftRanks)");
}

TEST_CASE("random fault rounds keep every invariant", "[restart][assignment]") {
  std::mt19937 rng(20261122);
  for (int trial = 0; trial < 200; ++trial) {
    const int size = std::uniform_int_distribution<int>(16, 256)(rng);
    const int perHost = 8;
    auto host = [perHost](int i) { return std::to_string(i / perHost); };
    const bool fill = rng() % 2 == 0;
    std::vector<RankAssignmentPtr> parts;
    if (rng() % 2 == 0) {
      parts.push_back(activeWorldSizeDivisibleBy(1 + static_cast<int>(rng() % 8)));
    }
    if (rng() % 2 == 0) {
      parts.push_back(
          maxActiveWorldSize(1 + static_cast<int>(rng() % static_cast<unsigned>(size))));
    }
    if (rng() % 2 == 0) {
      parts.push_back(filterCountGroupedByKey([](int n) { return n >= 6; }, ">= 6 per host"));
    }
    parts.push_back(activateAllRanks());
    parts.push_back(fill ? fillGaps() : shiftRanks());
    const auto policy = compose(parts);
    CAPTURE(trial, size, policy->describe());
    World world(size);
    for (int round = 0; round < 16 && world.worldSize() > 1; ++round) {
      std::vector<int> live = world.liveByRank();
      std::shuffle(live.begin(), live.end(), rng);
      const int kill = std::uniform_int_distribution<int>(
          0, std::min<int>(8, static_cast<int>(live.size()) - 1))(rng);
      std::vector<int> terminated(live.begin(), live.begin() + kill);
      AssignmentContext context{terminated, host};
      const World next = assignRanks(world, *policy, context);  // throws if inconsistent
      CHECK(next == assignRanks(world, *policy, context));      // deterministic
      REQUIRE(next.worldSize() == world.worldSize() - kill);
      CHECK(next.activeWorldSize() <= next.worldSize());
      // Survivors' relative order: kept by ShiftRanks; FillGaps keeps low ranks.
      const std::set<int> dead(terminated.begin(), terminated.end());
      for (int i = 0; i < size; ++i) {
        if (world.terminated(i) || dead.count(i) != 0) {
          CHECK(next.terminated(i));
        } else if (fill && world.at(i).rank < next.worldSize()) {
          CHECK(next.at(i).rank == world.at(i).rank);
        }
      }
      if (!fill) {
        const std::vector<int> before = world.liveByRank();
        std::vector<int> kept;
        std::copy_if(before.begin(), before.end(), std::back_inserter(kept),
                     [&](int i) { return dead.count(i) == 0; });
        CHECK(next.liveByRank() == kept);
      }
      world = next;
    }
  }
}

TEST_CASE("processes that joined the job come in as spares after the others",
          "[restart][assignment][join]") {
  // 6 active of 8; initial rank 2 died; one process joined in its place.
  const RankAssignmentPtr six =
      compose({maxActiveWorldSize(6), activateAllRanks(), shiftRanks()});
  const auto context = [](std::vector<int> terminated, int joinedCount) {
    AssignmentContext c;
    c.terminated = std::move(terminated);
    c.joined = joinedCount;
    return c;
  };
  AssignmentContext first;
  first.firstIteration = true;
  World w = assignRanks(World(8), *six, first);
  REQUIRE(modesOf(w) == std::vector<Mode>{A, A, A, A, A, A, I, I});
  const World next = assignRanks(w, *six, context({2}, 1));
  REQUIRE(next.initialWorldSize() == 9);
  CHECK(next.inconsistency().empty());
  CHECK(modesOf(next) == std::vector<Mode>{A, A, T, A, A, A, A, I, I});
  CHECK(next.at(8).rank == 7);  // the newcomer is ranked last
  // The default policy activates it at once.
  const World all = assignRanks(World(3), *defaultRankAssignment(), context({1}, 1));
  CHECK(modesOf(all) == std::vector<Mode>{A, T, A, A});
  CHECK(all.at(3).activeRank == 2);
  // A joiner that died before it was admitted enters terminated.
  const World dead = assignRanks(World(3), *defaultRankAssignment(), context({1, 3}, 1));
  CHECK(modesOf(dead) == std::vector<Mode>{A, T, A, T});
  CHECK(dead.activeWorldSize() == 2);
  CHECK_THROWS_AS(World(2).addSpares(-1), std::invalid_argument);
}
