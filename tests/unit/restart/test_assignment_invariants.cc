// Randomized fault rounds over every policy family: 16-256 ranks, up to 16
// rounds of random terminations, a fixed list of seeds (printed on failure,
// so a failing case reruns alone with the same seed). Checked after every
// round: the World is consistent, active <= alive, terminated ranks never
// come back, the same inputs give the same World (also with a fresh policy
// object, whose Tree layout is built anew), spares are activated when active
// ranks die, and a Tree terminates exactly the domains below their minimum.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/tree.hpp"

using namespace resilient::restart;

namespace {

const std::vector<unsigned> kSeeds{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610};

struct Shape {
  int size;
  int perHost;
  int perRack;  // ranks per rack
  std::string host(int i) const { return "h" + std::to_string(i / perHost); }
  std::string rack(int i) const { return "r" + std::to_string(i / perRack); }
};

Shape randomShape(std::mt19937& rng) {
  Shape s{};
  s.size = std::uniform_int_distribution<int>(16, 256)(rng);
  s.perHost = rng() % 2 == 0 ? 4 : 8;
  s.perRack = s.perHost * (2 + static_cast<int>(rng() % 3));
  return s;
}

// A composed policy and the active count it must produce from the live ranks
// (empty where that depends on the groups).
struct Composition {
  std::string name;
  RankAssignmentPtr policy;
  std::function<int(int live)> expectedActive;
  bool shifts;  // shiftRanks (order kept) rather than fillGaps
  int filterMin = 0;  // > 0: filterCountGroupedByKey(count >= filterMin) per host
  int divisor = 1;
};

Composition randomComposition(int kind, const Shape& s, std::mt19937& rng) {
  const int maxActive = std::max(1, s.size - 1 - static_cast<int>(rng() % 16));
  const int divisor = 2 + static_cast<int>(rng() % 7);
  const int filterMin = s.perHost - static_cast<int>(rng() % 2);
  auto filter = [filterMin] {
    return filterCountGroupedByKey([filterMin](int n) { return n >= filterMin; }, "min per host");
  };
  switch (kind) {
    case 0:
      return {"default", defaultRankAssignment(), [](int live) { return live; }, true};
    case 1:
      return {"max-active+fill-gaps",
              compose({maxActiveWorldSize(maxActive), activateAllRanks(), fillGaps()}),
              [maxActive](int live) { return std::min(live, maxActive); }, false};
    case 2:
      return {"divisible+max-active+shift",
              compose({activeWorldSizeDivisibleBy(divisor), maxActiveWorldSize(maxActive),
                       activateAllRanks(), shiftRanks()}),
              [=](int live) {
                const int m = std::min(live, maxActive);
                return m - m % divisor;
              },
              true};
    case 3:
      return {"filter+shift", compose({filter(), activateAllRanks(), shiftRanks()}), {}, true,
              filterMin};
    default:
      return {"divisible+filter+fill-gaps",
              compose({activeWorldSizeDivisibleBy(divisor), filter(), activateAllRanks(),
                       fillGaps()}),
              {},
              false,
              filterMin,
              divisor};
  }
}

std::vector<int> randomKills(const World& w, std::mt19937& rng) {
  std::vector<int> live = w.liveByRank();
  std::shuffle(live.begin(), live.end(), rng);
  const int most = std::min<int>(12, static_cast<int>(live.size()));
  const int kill = std::uniform_int_distribution<int>(0, most)(rng);
  std::vector<int> dead(live.begin(), live.begin() + kill);
  if (rng() % 4 == 0) {
    for (int i = 0; i < w.initialWorldSize(); ++i) {
      if (w.terminated(i)) {
        dead.push_back(i);  // reported again: must stay terminated, nothing else
        break;
      }
    }
  }
  return dead;
}

void checkCommon(const World& before, const World& next, const std::vector<int>& dead) {
  INFO(next.inconsistency());
  CHECK(next.inconsistency().empty());
  CHECK(next.activeWorldSize() <= next.worldSize());
  for (int i = 0; i < next.initialWorldSize(); ++i) {
    if (before.terminated(i)) {
      CHECK(next.terminated(i));  // never comes back
    }
  }
  for (const int i : dead) {
    CHECK(next.terminated(i));
  }
}

int activeIn(const World& w, const std::function<bool(int)>& where) {
  int n = 0;
  for (int i = 0; i < w.initialWorldSize(); ++i) {
    n += w.at(i).mode == Mode::kActive && where(i) ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("random fault rounds: composed policies keep their invariants",
          "[restart][assignment][invariants]") {
  for (const unsigned seed : kSeeds) {
    for (int kind = 0; kind < 5; ++kind) {
      std::mt19937 rng(seed * 7919u + static_cast<unsigned>(kind));
      const Shape s = randomShape(rng);
      const Composition c = randomComposition(kind, s, rng);
      // A second instance of the same policy (same draws): results must match.
      std::mt19937 rngAgain(seed * 7919u + static_cast<unsigned>(kind));
      randomShape(rngAgain);
      const Composition twin = randomComposition(kind, s, rngAgain);
      INFO("seed " << seed << ", policy " << c.policy->describe() << ", ranks " << s.size
                   << ", per host " << s.perHost);
      auto key = [&s](int i) { return s.host(i); };
      World world = assignRanks(World(s.size), *c.policy, AssignmentContext{{}, key, true});
      for (int round = 0; round < 16 && world.worldSize() > 0; ++round) {
        INFO("round " << round);
        const std::vector<int> dead = randomKills(world, rng);
        const AssignmentContext ctx{dead, key};
        const World next = assignRanks(world, *c.policy, ctx);
        checkCommon(world, next, dead);
        CHECK(next == assignRanks(world, *c.policy, ctx));
        CHECK(next == assignRanks(world, *twin.policy, ctx));
        if (c.expectedActive) {
          // Spares replace dead active ranks up to the policy's size.
          CHECK(next.activeWorldSize() == c.expectedActive(next.worldSize()));
        } else {
          std::map<std::string, int> live;
          for (const int i : next.liveByRank()) {
            ++live[s.host(i)];
          }
          int eligible = 0;
          for (const auto& [h, n] : live) {
            eligible += n >= c.filterMin ? n : 0;
          }
          CHECK(next.activeWorldSize() == eligible - eligible % c.divisor);
          for (const int i : next.liveByRank()) {
            if (live[s.host(i)] < c.filterMin) {
              CHECK(next.at(i).mode == Mode::kInactive);
            }
          }
        }
        if (c.shifts) {
          std::vector<int> kept = world.liveByRank();
          kept.erase(std::remove_if(kept.begin(), kept.end(),
                                    [&](int i) { return next.terminated(i); }),
                     kept.end());
          CHECK(next.liveByRank() == kept);
        } else {
          for (const int i : next.liveByRank()) {
            if (world.at(i).rank < next.worldSize()) {
              CHECK(next.at(i).rank == world.at(i).rank);
            }
          }
        }
        world = next;
      }
    }
  }
}

namespace {

struct TreeCase {
  std::string name;
  std::vector<Layer> layers;
  std::function<int(int)> filter;
  bool rootReserve = false;  // a spare anywhere may replace any failed rank
  bool hostOnlyReserve = false;
  bool rackBackfillOnly = false;  // no spares, no minimum: the backfill oracle applies
};

// layers[1] is the rack layer when present, the last is the host layer.
TreeCase randomTree(int kind, const Shape& s, std::mt19937& rng) {
  auto host = [s](int i) { return s.host(i); };
  auto rack = [s](int i) { return s.rack(i); };
  const int hostMax = s.perHost - 1 - static_cast<int>(rng() % 2);
  const int hostMin = 1 + static_cast<int>(rng() % static_cast<unsigned>(hostMax));
  switch (kind) {
    case 0:  // spares anywhere in the job
      return {"root+host reserve",
              {Layer{1, -1, {}, Layer::kReserve}, Layer{hostMin, hostMax, host, Layer::kReserve}},
              {},
              true};
    case 1:  // spares only within the host; the rack backfills
      return {"host reserve, rack backfill",
              {Layer{1, -1, {}, Layer::kNone}, Layer{1, -1, rack, Layer::kBackfill},
               Layer{hostMin, hostMax, host, Layer::kReserve}},
              {},
              false,
              true};
    case 2:  // reserve and backfill everywhere, a world-size filter
      return {"all reserve, filter",
              {Layer{1, -1, {}, Layer::kReserve},
               Layer{1, -1, rack, Layer::kReserve | Layer::kBackfill},
               Layer{hostMin, hostMax, host, Layer::kReserve}},
              [](int n) { return n - n % 4; }};
    case 3:  // no spares: every hole is backfilled inside its rack, or shifted over
      return {"rack backfill only",
              {Layer{1, -1, {}, Layer::kNone}, Layer{1, -1, rack, Layer::kBackfill},
               Layer{1, -1, host, Layer::kNone}},
              {},
              false,
              false,
              true};
    default:  // full hosts only, racks need two hosts, the job half its ranks
      return {"min propagation",
              {Layer{s.size / 2, -1, {}, Layer::kReserve},
               Layer{2 * s.perHost, s.perRack - s.perHost, rack,
                     Layer::kReserve | Layer::kBackfill},
               Layer{s.perHost, s.perHost, host, Layer::kNone}},
              {}};
  }
}

// Which ranks must be terminated after `dead`: a domain below its layer's
// minimum drops out whole, deepest layer first.
std::vector<bool> expectedTerminated(const World& before, const std::vector<int>& dead,
                                     const std::vector<Layer>& layers) {
  const int n = before.initialWorldSize();
  std::vector<bool> gone(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    gone[static_cast<size_t>(i)] = before.terminated(i);
  }
  for (const int i : dead) {
    gone[static_cast<size_t>(i)] = true;
  }
  for (size_t k = layers.size(); k-- > 0;) {
    auto domainOf = [&](int i) { return k == 0 ? std::string() : layers[k].key(i); };
    std::map<std::string, int> live;
    for (int i = 0; i < n; ++i) {
      live[domainOf(i)] += gone[static_cast<size_t>(i)] ? 0 : 1;
    }
    for (int i = 0; i < n; ++i) {
      if (live[domainOf(i)] < layers[k].minRanks) {
        gone[static_cast<size_t>(i)] = true;
      }
    }
  }
  return gone;
}

// The live ranks in rank order after `dead` when every rank is active and the
// racks only backfill: in each rack, holes are taken lowest first, each by the
// rack's highest-ranked survivor above it; then everything shifts.
std::vector<int> backfillOracle(const World& before, const std::vector<int>& dead,
                                const Shape& s) {
  const int n = before.initialWorldSize();
  std::vector<bool> gone(static_cast<size_t>(n));
  for (const int i : dead) {
    gone[static_cast<size_t>(i)] = true;
  }
  std::vector<int> place(static_cast<size_t>(n), -1);  // rank before the shift
  std::map<std::string, std::vector<int>> rackOrder;   // survivors of a rack by rank
  std::map<std::string, std::vector<int>> holes;
  for (const int i : before.liveByRank()) {
    place[static_cast<size_t>(i)] = before.at(i).rank;
    (gone[static_cast<size_t>(i)] ? holes : rackOrder)[s.rack(i)].push_back(i);
  }
  for (auto& [rack, hs] : holes) {
    std::vector<int>& members = rackOrder[rack];
    for (const int h : hs) {
      const int hole = before.at(h).rank;
      if (!members.empty() && place[static_cast<size_t>(members.back())] > hole) {
        place[static_cast<size_t>(members.back())] = hole;
        members.insert(std::upper_bound(members.begin(), members.end() - 1, hole,
                                        [&](int r, int m) { return r < place[static_cast<size_t>(m)]; }),
                       members.back());
        members.pop_back();
      }
    }
  }
  std::vector<int> order;
  for (const int i : before.liveByRank()) {
    if (!gone[static_cast<size_t>(i)]) {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return place[static_cast<size_t>(a)] < place[static_cast<size_t>(b)]; });
  return order;
}

// A spare that could still be activated: inactive, and no layer's maximum
// reached in its domains.
bool eligibleSpare(const World& w, const std::vector<Layer>& layers, int s) {
  if (w.at(s).mode != Mode::kInactive) {
    return false;
  }
  for (size_t k = 0; k < layers.size(); ++k) {
    if (layers[k].maxRanks >= 0) {
      auto same = [&](int i) { return k == 0 || layers[k].key(i) == layers[k].key(s); };
      if (activeIn(w, same) >= layers[k].maxRanks) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

TEST_CASE("random fault rounds: Tree layouts keep their invariants",
          "[restart][assignment][invariants][tree]") {
  for (const unsigned seed : kSeeds) {
    for (int kind = 0; kind < 5; ++kind) {
      std::mt19937 rng(seed * 104729u + static_cast<unsigned>(kind));
      const Shape s = randomShape(rng);
      const TreeCase t = randomTree(kind, s, rng);
      const auto policy = tree(t.layers, t.filter);
      INFO("seed " << seed << ", tree " << t.name << ", ranks " << s.size << ", per host "
                   << s.perHost << ", per rack " << s.perRack);
      World world = assignRanks(World(s.size), *policy, AssignmentContext{{}, {}, true});
      for (int round = 0; round < 16 && world.worldSize() > 0; ++round) {
        INFO("round " << round);
        const std::vector<int> dead = randomKills(world, rng);
        const AssignmentContext ctx{dead, {}};
        const World next = assignRanks(world, *policy, ctx);
        checkCommon(world, next, dead);
        CHECK(next == assignRanks(world, *policy, ctx));
        CHECK(next == assignRanks(world, *tree(t.layers, t.filter), ctx));  // fresh layout

        const std::vector<bool> gone = expectedTerminated(world, dead, t.layers);
        for (int i = 0; i < s.size; ++i) {
          CHECK(next.terminated(i) == gone[static_cast<size_t>(i)]);
        }
        for (size_t k = 0; k < t.layers.size(); ++k) {
          if (t.layers[k].maxRanks < 0) {
            continue;
          }
          for (const int i : next.liveByRank()) {
            auto same = [&](int j) { return k == 0 || t.layers[k].key(j) == t.layers[k].key(i); };
            CHECK(activeIn(next, same) <= t.layers[k].maxRanks);
          }
        }
        for (const int i : next.liveByRank()) {
          if (next.at(i).mode == Mode::kActive) {
            CHECK(next.at(i).rank == next.at(i).activeRank);  // actives lead the rank order
          }
        }
        bool spareLeft = false;
        for (const int i : next.liveByRank()) {
          spareLeft = spareLeft || eligibleSpare(next, t.layers, i);
        }
        if (t.rootReserve) {
          // Every failed active rank was replaced unless no spare could be.
          CHECK(next.activeWorldSize() <= world.activeWorldSize());
          if (spareLeft) {
            CHECK(next.activeWorldSize() == world.activeWorldSize());
          }
        }
        if (t.hostOnlyReserve) {
          for (const int i : next.liveByRank()) {
            if (!eligibleSpare(next, t.layers, i)) {
              continue;
            }
            // This host still has a usable spare: every active rank it lost
            // was replaced from within it.
            auto here = [&](int j) { return s.host(j) == s.host(i); };
            CHECK(activeIn(next, here) == activeIn(world, here));
          }
        }
        if (t.rackBackfillOnly) {
          CHECK(next.liveByRank() == backfillOracle(world, dead, s));
        }
        world = next;
      }
    }
  }
}
