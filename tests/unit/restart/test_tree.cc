// The topology-aware Tree policy: layout, spares from RESERVE domains,
// backfill, minimum domain sizes, the world-size filter, and random rounds.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/tree.hpp"
#include "tests/unit/restart/world_views.h"

using namespace resilient::restart;
using namespace resilient::restart::test;

namespace {

std::string hostOf4(int i) {
  return "host" + std::to_string(i / 4);
}

World first(int n, const RankAssignmentPtr& policy) {
  AssignmentContext c;
  c.firstIteration = true;
  return assignRanks(World(n), *policy, c);
}

std::vector<int> activeOf(const World& w) {
  std::vector<int> out;
  for (int i = 0; i < w.initialWorldSize(); ++i) {
    if (w.at(i).mode == Mode::kActive) {
      out.push_back(i);
    }
  }
  return out;
}

// Two hosts of four ranks, at most three active per host.
RankAssignmentPtr hosts(unsigned hostFlags, int hostMin = 1) {
  return tree({Layer{}, Layer{hostMin, 3, hostOf4, hostFlags}});
}

}  // namespace

TEST_CASE("the first layout activates depth-first under each domain's maximum",
          "[restart][assignment][tree]") {
  const World w = first(8, hosts(Layer::kNone));
  CHECK(activeOf(w) == std::vector<int>{0, 1, 2, 4, 5, 6});
  CHECK(ranksOf(w) == std::vector<int>{0, 1, 2, 6, 3, 4, 5, 7});  // spares after the actives
  CHECK(w.at(4).activeRank == 3);
}

TEST_CASE("a failed rank is replaced by a spare of its RESERVE domain, in its place",
          "[restart][assignment][tree]") {
  const auto policy = hosts(Layer::kReserve);
  const World w = assign(first(8, policy), policy, {1});
  CHECK(activeOf(w) == std::vector<int>{0, 2, 3, 4, 5, 6});
  CHECK(w.at(3).rank == 1);  // the spare took rank 1
  CHECK(ranksOf(w) == std::vector<int>{0, -1, 2, 1, 3, 4, 5, 6});
}

TEST_CASE("without a spare that fits, BACKFILL moves the domain's last active rank into the hole",
          "[restart][assignment][tree]") {
  // Host 0 loses rank 1 and its spare 3; host 1's spare may not join host 0's
  // domain (host 1 is full), so host 0 backfills: initial 2 moves to rank 1.
  const auto policy = tree({Layer{1, -1, {}, Layer::kReserve},
                            Layer{1, 3, hostOf4, Layer::kReserve | Layer::kBackfill}});
  const World w = assign(first(8, policy), policy, {1, 3});
  CHECK(activeOf(w) == std::vector<int>{0, 2, 4, 5, 6});
  CHECK(w.at(2).rank == 1);
  CHECK(w.at(7).mode == Mode::kInactive);  // host 1's spare stays: host 1 has 3 active
  CHECK(ranksOf(w) == std::vector<int>{0, -1, 1, -1, 2, 3, 4, 5});
}

TEST_CASE("a domain below its minimum is terminated whole", "[restart][assignment][tree]") {
  const auto policy = hosts(Layer::kReserve, 3);
  const World w = assign(first(8, policy), policy, {0, 1});
  for (int i = 0; i < 4; ++i) {
    CHECK(w.terminated(i));
  }
  CHECK(activeOf(w) == std::vector<int>{4, 5, 6});
  CHECK(ranksOf(w) == std::vector<int>{-1, -1, -1, -1, 0, 1, 2, 3});
}

TEST_CASE("the world-size filter cuts the active count", "[restart][assignment][tree]") {
  const auto policy =
      tree({Layer{}, Layer{1, -1, hostOf4, Layer::kNone}}, [](int n) { return n - n % 4; });
  const World w = assign(first(12, policy), policy, {5});
  CHECK(w.activeWorldSize() == 8);
  CHECK(w.worldSize() == 11);
}

TEST_CASE("bad layers are refused", "[restart][assignment][tree]") {
  CHECK_THROWS_AS(tree({}), std::invalid_argument);
  CHECK_THROWS_WITH(tree({Layer{}, Layer{}}), Catch::Contains("layer 1 has no key"));
  CHECK_THROWS_WITH(tree({Layer{-1, 2, {}, Layer::kNone}}),
                    Catch::Contains("minRanks -1, maxRanks 2 is not a valid range"));
  CHECK_THROWS_WITH(tree({Layer{1, 0, {}, Layer::kNone}}),
                    Catch::Contains("minRanks 1, maxRanks 0 is not a valid range"));
}

TEST_CASE("random failures keep the domain limits and a consistent world",
          "[restart][assignment][tree]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    const int perHost = 4 + static_cast<int>(rng() % 5);
    const int hostsN = 2 + static_cast<int>(rng() % 30);
    const int perRack = 2 + static_cast<int>(rng() % 4);
    const int n = perHost * hostsN;
    const int maxActive = std::max(1, perHost - static_cast<int>(rng() % 3));
    const int minLive = 1 + static_cast<int>(rng() % 3);
    auto host = [perHost](int i) { return std::to_string(i / perHost); };
    auto rack = [perHost, perRack](int i) { return std::to_string(i / perHost / perRack); };
    const auto policy = tree({Layer{1, -1, {}, Layer::kReserve},
                              Layer{1, -1, rack, Layer::kReserve | Layer::kBackfill},
                              Layer{minLive, maxActive, host, Layer::kReserve}});
    CAPTURE(trial, n, perHost, maxActive, minLive);
    World w = first(n, policy);
    for (int round = 0; round < 16 && w.worldSize() > 1; ++round) {
      std::vector<int> live = w.liveByRank();
      std::shuffle(live.begin(), live.end(), rng);
      const int kill =
          std::min<int>(static_cast<int>(rng() % 4), static_cast<int>(live.size()) - 1);
      const World next = assign(w, policy, std::vector<int>(live.begin(), live.begin() + kill));
      CHECK(next == assign(w, policy, std::vector<int>(live.begin(), live.begin() + kill)));
      std::map<std::string, int> activePerHost;
      std::map<std::string, int> livePerHost;
      for (int i = 0; i < n; ++i) {
        if (!next.terminated(i)) {
          ++livePerHost[host(i)];
        }
        if (next.at(i).mode == Mode::kActive) {
          ++activePerHost[host(i)];
          CHECK(next.at(i).rank == next.at(i).activeRank);  // actives lead the rank order
        }
      }
      for (const auto& [h, count] : activePerHost) {
        CHECK(count <= maxActive);
      }
      for (const auto& [h, count] : livePerHost) {
        CHECK(count >= minLive);
      }
      w = next;
    }
  }
}
