#include "resilient/restart/tree.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace resilient::restart {
namespace {

class Tree final : public RankAssignment {
 public:
  Tree(std::vector<Layer> layers, std::function<int(int)> filter)
      : layers_(std::move(layers)), filter_(std::move(filter)) {
    if (layers_.empty()) {
      throw std::invalid_argument("tree() needs at least the root layer");
    }
    for (size_t k = 0; k < layers_.size(); ++k) {
      const Layer& l = layers_[k];
      if (k > 0 && !l.key) {
        throw std::invalid_argument("tree() layer " + std::to_string(k) + " has no key");
      }
      if (l.minRanks < 0 || (l.maxRanks != -1 && l.maxRanks < 1)) {
        throw std::invalid_argument("tree() layer " + std::to_string(k) + ": minRanks " +
                                    std::to_string(l.minRanks) + ", maxRanks " +
                                    std::to_string(l.maxRanks) + " is not a valid range");
      }
    }
  }

  std::string describe() const override {
    return "Tree(" + std::to_string(layers_.size()) + " layers)";
  }

  void apply(World& world, const AssignmentContext& context) const override {
    const Domains d = domainsOf(world);
    terminateSmallDomains(world, d);
    if (context.firstIteration || context.previous == nullptr) {
      layOut(world, d);
    } else {
      replaceFailed(world, d, *context.previous);
      shift(world);
    }
    cutActive(world);
  }

 private:
  // domain[k][i]: the index of initial rank i's domain at layer k (root: 0).
  struct Domains {
    std::vector<std::vector<int>> domain;
    std::vector<std::vector<int>> lowestMember;  // per layer, per domain
  };

  Domains domainsOf(const World& world) const {
    const int n = world.initialWorldSize();
    Domains d;
    d.domain.assign(layers_.size(), std::vector<int>(static_cast<size_t>(n), 0));
    d.lowestMember.assign(layers_.size(), {});
    d.lowestMember[0] = {0};
    for (size_t k = 1; k < layers_.size(); ++k) {
      std::map<std::pair<int, std::string>, int> ids;  // (parent domain, key) -> id
      for (int i = 0; i < n; ++i) {
        const auto id = std::make_pair(d.domain[k - 1][static_cast<size_t>(i)], layers_[k].key(i));
        auto [it, added] = ids.emplace(id, static_cast<int>(ids.size()));
        if (added) {
          d.lowestMember[k].push_back(i);
        }
        d.domain[k][static_cast<size_t>(i)] = it->second;
      }
    }
    return d;
  }

  // Step 1: deepest layer first, so that a host dropping out counts at its rack.
  void terminateSmallDomains(World& world, const Domains& d) const {
    const int n = world.initialWorldSize();
    for (size_t k = layers_.size(); k-- > 0;) {
      std::map<int, int> live;
      for (int i = 0; i < n; ++i) {
        if (!world.terminated(i)) {
          ++live[d.domain[k][static_cast<size_t>(i)]];
        }
      }
      for (int i = 0; i < n; ++i) {
        if (!world.terminated(i) &&
            live[d.domain[k][static_cast<size_t>(i)]] < layers_[k].minRanks) {
          world.terminate(i);
        }
      }
    }
  }

  // Active ranks per domain, per layer (kept up to date by the steps).
  using Counts = std::vector<std::map<int, int>>;

  Counts activeCounts(const World& world, const Domains& d) const {
    Counts c(layers_.size());
    for (int i = 0; i < world.initialWorldSize(); ++i) {
      if (world.at(i).mode == Mode::kActive) {
        for (size_t k = 0; k < layers_.size(); ++k) {
          ++c[k][d.domain[k][static_cast<size_t>(i)]];
        }
      }
    }
    return c;
  }

  bool roomFor(const Counts& c, const Domains& d, int candidate) const {
    for (size_t k = 0; k < layers_.size(); ++k) {
      if (layers_[k].maxRanks >= 0) {
        const auto it = c[k].find(d.domain[k][static_cast<size_t>(candidate)]);
        if (it != c[k].end() && it->second >= layers_[k].maxRanks) {
          return false;
        }
      }
    }
    return true;
  }

  static void activate(Counts& c, const Domains& d, int i) {
    for (size_t k = 0; k < c.size(); ++k) {
      ++c[k][d.domain[k][static_cast<size_t>(i)]];
    }
  }

  // First iteration: depth-first activation under each domain's maxRanks;
  // actives take ranks 0..a-1 in that order, spares the ranks after them.
  void layOut(World& world, const Domains& d) const {
    std::vector<int> order;
    for (int i = 0; i < world.initialWorldSize(); ++i) {
      if (!world.terminated(i)) {
        order.push_back(i);
        world.at(i).mode = Mode::kInactive;
      }
    }
    auto path = [&](int i) {
      std::vector<int> p;
      for (size_t k = 0; k < layers_.size(); ++k) {
        p.push_back(d.lowestMember[k][static_cast<size_t>(d.domain[k][static_cast<size_t>(i)])]);
      }
      p.push_back(i);
      return p;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return path(a) < path(b); });
    std::vector<int> spares;
    Counts counts(layers_.size());
    int next = 0;
    for (const int i : order) {
      if (roomFor(counts, d, i)) {
        activate(counts, d, i);
        world.at(i).mode = Mode::kActive;
        world.at(i).rank = next++;
      } else {
        spares.push_back(i);
      }
    }
    for (const int i : spares) {
      world.at(i).rank = next++;
    }
  }

  // Steps 2 and 3, for every active rank that is gone, lowest rank first.
  void replaceFailed(World& world, const Domains& d, const World& previous) const {
    std::vector<int> failed;
    for (int i = 0; i < world.initialWorldSize(); ++i) {
      if (previous.at(i).mode == Mode::kActive && world.terminated(i)) {
        failed.push_back(i);
      }
    }
    std::sort(failed.begin(), failed.end(),
              [&](int a, int b) { return previous.at(a).rank < previous.at(b).rank; });
    Counts counts = activeCounts(world, d);
    // The survivors of every domain in rank order (spares keep their relative
    // order until promoted).
    Members members(layers_.size());
    for (const int i : world.liveByRank()) {
      for (size_t k = 0; k < layers_.size(); ++k) {
        members[k][d.domain[k][static_cast<size_t>(i)]].push_back(i);
      }
    }
    for (const int f : failed) {
      const int hole = previous.at(f).rank;
      if (!promoteSpare(world, d, counts, members, f, hole)) {
        backfill(world, d, members, f, hole);
      }
    }
  }

  using Members = std::vector<std::map<int, std::vector<int>>>;

  bool promoteSpare(World& world, const Domains& d, Counts& counts, const Members& members,
                    int failed, int hole) const {
    for (size_t k = layers_.size(); k-- > 0;) {
      if ((layers_[k].flags & Layer::kReserve) == 0) {
        continue;
      }
      const int dom = d.domain[k][static_cast<size_t>(failed)];
      const auto m = members[k].find(dom);
      if (m == members[k].end()) {
        continue;
      }
      int best = -1;
      for (const int i : m->second) {
        if (world.at(i).mode == Mode::kInactive && roomFor(counts, d, i)) {
          best = i;
          break;  // in rank order: the lowest-ranked spare
        }
      }
      if (best >= 0) {
        activate(counts, d, best);
        world.at(best).mode = Mode::kActive;
        world.at(best).rank = hole;
        return true;
      }
    }
    return false;
  }

  void backfill(World& world, const Domains& d, const Members& members, int failed,
                int hole) const {
    for (size_t k = layers_.size(); k-- > 0;) {
      if ((layers_[k].flags & Layer::kBackfill) == 0) {
        continue;
      }
      const auto m = members[k].find(d.domain[k][static_cast<size_t>(failed)]);
      if (m == members[k].end()) {
        continue;
      }
      int highest = -1;
      for (const int i : m->second) {
        if (world.at(i).mode == Mode::kActive && world.at(i).rank > hole &&
            (highest < 0 || world.at(i).rank > world.at(highest).rank)) {
          highest = i;
        }
      }
      if (highest >= 0) {
        world.at(highest).rank = hole;
        return;
      }
    }
  }

  static void shift(World& world) {
    int next = 0;
    for (const int i : world.liveByRank()) {
      world.at(i).rank = next++;
    }
  }

  // Step 5.
  void cutActive(World& world) const {
    if (!filter_) {
      return;
    }
    std::vector<int> active;
    for (const int i : world.liveByRank()) {
      if (world.at(i).mode == Mode::kActive) {
        active.push_back(i);
      }
    }
    const int keep =
        std::clamp(filter_(static_cast<int>(active.size())), 0, static_cast<int>(active.size()));
    for (size_t k = static_cast<size_t>(keep); k < active.size(); ++k) {
      world.at(active[k]).mode = Mode::kInactive;
    }
  }

  std::vector<Layer> layers_;
  std::function<int(int)> filter_;
};

}  // namespace

RankAssignmentPtr tree(std::vector<Layer> layers, std::function<int(int activeCount)> filter) {
  return std::make_shared<Tree>(std::move(layers), std::move(filter));
}

}  // namespace resilient::restart
