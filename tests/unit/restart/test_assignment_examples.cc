// The examples of the reference restarter's rank-assignment documentation
// (docs/reference/restart-model.md §1.2), as concrete cases. Where our
// policy differs on purpose (filterCountGroupedByKey benches a group instead
// of terminating it), the case says so.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/tree.hpp"
#include "tests/unit/restart/world_views.h"

using namespace resilient::restart;
using namespace resilient::restart::test;

namespace {

constexpr Mode A = Mode::kActive;
constexpr Mode I = Mode::kInactive;
constexpr Mode T = Mode::kTerminated;

}  // namespace

// | 0 | X | 2 | 3 | X | X | 6 | 7 | --> | 0 | 2 | 3 | 6 | 7 |
TEST_CASE("reference example: ShiftRanks", "[restart][assignment][examples]") {
  const World w = assign(World(8), defaultRankAssignment(), {1, 4, 5});
  CHECK(ranksOf(w) == std::vector<int>{0, -1, 1, 2, -1, -1, 3, 4});
  CHECK(w.worldSize() == 5);
  CHECK(w.activeWorldSize() == 5);
}

// | 0 | X | 2 | 3 | X | X | 6 | 7 | --> | 0 | 6 | 2 | 3 | 7 |
// The first world - k = 5 ranks keep their place; 6 and 7 fill holes 1 and 4.
TEST_CASE("reference example: FillGaps", "[restart][assignment][examples]") {
  const World w = assign(World(8), compose({activateAllRanks(), fillGaps()}), {1, 4, 5});
  CHECK(ranksOf(w) == std::vector<int>{0, -1, 2, 3, -1, -1, 1, 4});
  CHECK(w.worldSize() == 5);
}

// condition: count == 2, keys 0..3 in pairs; counts 1, 2, 0, 2 after
// | 0 | X | 2 | 3 | X | X | 6 | 7 |: only groups 1 and 3 keep computing. The
// reference terminates rank 0; we keep it as a spare (it is healthy).
TEST_CASE("reference example: FilterCountGroupedByKey", "[restart][assignment][examples]") {
  auto pair = [](int i) { return std::to_string(i / 2); };
  const auto policy = compose({filterCountGroupedByKey([](int n) { return n == 2; }, "== 2"),
                               activateAllRanks(), shiftRanks()});
  const World w = assign(World(8), policy, {1, 4, 5}, pair);
  CHECK(modesOf(w) == std::vector<Mode>{I, T, A, A, T, T, A, A});
  CHECK(ranksOf(w) == std::vector<int>{0, -1, 1, 2, -1, -1, 3, 4});
  CHECK(w.activeWorldSize() == 4);
  CHECK(w.at(2).activeRank == 0);
  CHECK(w.at(7).activeRank == 3);
}

// The usage guide's "host must keep all 8 ranks" filter: a host that lost one
// rank stops computing, the other hosts shift down over it.
TEST_CASE("reference example: eight healthy ranks per host", "[restart][assignment][examples]") {
  auto host = [](int i) { return "node" + std::to_string(i / 8); };
  const auto policy = compose({filterCountGroupedByKey([](int n) { return n == 8; }, "== 8"),
                               activateAllRanks(), shiftRanks()});
  const World w = assign(World(32), policy, {13}, host);
  CHECK(w.worldSize() == 31);
  CHECK(w.activeWorldSize() == 24);
  for (int i = 8; i < 16; ++i) {
    CHECK(w.at(i).mode == (i == 13 ? T : I));
  }
  CHECK(w.at(16).activeRank == 8);  // host 2 follows host 0 among the active ranks
}

// The Tree example: root (min 128, max 256, RESERVE) -> host (min 8, max 8,
// RESERVE). 40 hosts of 8: the first 32 hosts compute, 8 hosts are spares.
TEST_CASE("reference example: Tree with RESERVE at the root and the host",
          "[restart][assignment][examples][tree]") {
  auto host = [](int i) { return "node" + std::to_string(i / 8); };
  const auto policy =
      tree({Layer{128, 256, {}, Layer::kReserve}, Layer{8, 8, host, Layer::kReserve}});
  const World start = assign(World(320), policy, {}, {}, true);
  CHECK(start.activeWorldSize() == 256);
  CHECK(start.at(255).mode == A);
  CHECK(start.at(256).mode == I);
  CHECK(start.at(256).rank == 256);

  SECTION("a host that loses a rank drops out whole; a spare host takes its ranks") {
    const World w = assign(start, policy, {3});
    for (int i = 0; i < 8; ++i) {
      CHECK(w.terminated(i));
    }
    // Host 0 has no spare of its own: the search goes up to the root and takes
    // the lowest-ranked spares (host 32) into ranks 0..7.
    for (int i = 256; i < 264; ++i) {
      CHECK(w.at(i).mode == A);
      CHECK(w.at(i).rank == i - 256);
    }
    CHECK(w.at(8).rank == 8);  // host 1 keeps its ranks
    CHECK(w.activeWorldSize() == 256);
    CHECK(w.worldSize() == 312);
    CHECK(w.at(264).mode == I);
    CHECK(w.at(264).rank == 256);  // the spares shift down over the moved host
  }

  SECTION("fewer than 128 healthy ranks: the whole job is terminated") {
    std::vector<int> oneRankOfEach;
    for (int h = 0; h < 25; ++h) {
      oneRankOfEach.push_back(8 * h);  // 25 hosts drop out: 15 x 8 = 120 ranks left
    }
    const World w = assign(start, policy, oneRankOfEach);
    CHECK(w.worldSize() == 0);
    CHECK(w.activeWorldSize() == 0);
  }
}

// The Tree's optional world-size filter: the survivors past the returned size
// become spares (here the active count is kept a multiple of 8).
TEST_CASE("reference example: Tree world-size filter", "[restart][assignment][examples][tree]") {
  auto host = [](int i) { return "node" + std::to_string(i / 4); };
  const auto policy =
      tree({Layer{}, Layer{1, -1, host, Layer::kNone}}, [](int n) { return n - n % 8; });
  const World start = assign(World(16), policy, {}, {}, true);
  CHECK(start.activeWorldSize() == 16);
  const World w = assign(start, policy, {2});
  CHECK(w.worldSize() == 15);
  CHECK(w.activeWorldSize() == 8);
  CHECK(modesOf(w)[8] == A);
  CHECK(w.at(9).mode == I);  // rank 8 of 15: the first one past the filtered size
  CHECK(w.at(9).rank == 8);
}
