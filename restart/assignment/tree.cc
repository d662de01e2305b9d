#include "resilient/restart/tree.hpp"

#include <algorithm>
#include <utility>

#include "tree_layout.hpp"

namespace resilient::restart {
namespace {

using detail::TreeLayout;

// Live ranks of every domain of one layer, in rank order (compressed rows:
// the members of domain d are at [start[d], start[d + 1])).
struct Members {
  std::vector<int> start;
  std::vector<int> ranks;
};

Members membersOf(const TreeLayout& t, size_t k, const std::vector<int>& liveByRank) {
  Members m;
  m.start.assign(static_cast<size_t>(t.domainCount[k]) + 1, 0);
  for (const int i : liveByRank) {
    ++m.start[static_cast<size_t>(t.of(k, i)) + 1];
  }
  for (size_t d = 1; d < m.start.size(); ++d) {
    m.start[d] += m.start[d - 1];
  }
  std::vector<int> fill(m.start.begin(), m.start.end() - 1);
  m.ranks.resize(liveByRank.size());
  for (const int i : liveByRank) {
    m.ranks[static_cast<size_t>(fill[static_cast<size_t>(t.of(k, i))]++)] = i;
  }
  return m;
}

// One assignment's working state over a cached layout.
class Pass {
 public:
  Pass(const std::vector<Layer>& layers, const TreeLayout& t, World& world)
      : layers_(layers), t_(t), world_(world), counts_(layers.size()) {
    for (size_t k = 0; k < layers_.size(); ++k) {
      counts_[k].assign(static_cast<size_t>(t_.domainCount[k]), 0);
    }
  }

  // Step 1: deepest layer first, so that a host dropping out counts at its rack.
  void terminateSmallDomains() {
    const int n = world_.initialWorldSize();
    for (size_t k = layers_.size(); k-- > 0;) {
      if (layers_[k].minRanks <= 1) {
        continue;  // a domain with a live rank has one; an empty one has none to drop
      }
      std::vector<int> live(static_cast<size_t>(t_.domainCount[k]), 0);
      for (int i = 0; i < n; ++i) {
        if (!world_.terminated(i)) {
          ++live[static_cast<size_t>(t_.of(k, i))];
        }
      }
      for (int i = 0; i < n; ++i) {
        if (!world_.terminated(i) && live[static_cast<size_t>(t_.of(k, i))] < layers_[k].minRanks) {
          world_.terminate(i);
        }
      }
    }
  }

  // First iteration: depth-first activation under each domain's maxRanks;
  // actives take ranks 0..a-1 in that order, spares the ranks after them.
  void layOut() {
    std::vector<int> spares;
    int next = 0;
    for (const int i : t_.depthFirst) {
      if (world_.terminated(i)) {
        continue;
      }
      RankSlot& s = world_.at(i);
      if (roomFor(i)) {
        activate(i);
        s.mode = Mode::kActive;
        s.rank = next++;
      } else {
        s.mode = Mode::kInactive;
        spares.push_back(i);
      }
    }
    for (const int i : spares) {
      world_.at(i).rank = next++;
    }
  }

  // Steps 2 and 3, for every active rank that is gone, lowest rank first.
  void replaceFailed(const World& previous) {
    std::vector<std::pair<int, int>> failed;  // (previous rank, initial rank)
    const int n = world_.initialWorldSize();
    for (int i = 0; i < n; ++i) {
      // Slots past the previous World's are processes that joined since.
      if (i < previous.initialWorldSize() && previous.at(i).mode == Mode::kActive &&
          world_.terminated(i)) {
        failed.emplace_back(previous.at(i).rank, i);
      }
    }
    if (failed.empty()) {
      return;
    }
    std::sort(failed.begin(), failed.end());
    for (int i = 0; i < n; ++i) {
      if (world_.at(i).mode == Mode::kActive) {
        activate(i);
      }
    }
    const std::vector<int> live = world_.liveByRank();
    prepareReserve(live);
    prepareBackfill(live);
    for (const auto& [hole, f] : failed) {
      if (!promoteSpare(f, hole)) {
        backfill(f, hole);
      }
    }
  }

  // Step 4.
  void shift() {
    int next = 0;
    for (const int i : world_.liveByRank()) {
      world_.at(i).rank = next++;
    }
  }

 private:
  bool roomFor(int i) const {
    for (size_t k = 0; k < layers_.size(); ++k) {
      const int max = layers_[k].maxRanks;
      if (max >= 0 && counts_[k][static_cast<size_t>(t_.of(k, i))] >= max) {
        return false;
      }
    }
    return true;
  }

  void activate(int i) {
    for (size_t k = 0; k < layers_.size(); ++k) {
      ++counts_[k][static_cast<size_t>(t_.of(k, i))];
    }
  }

  // Spare search: per RESERVE layer and domain, the live members in rank
  // order and a cursor past those that cannot serve. During a pass counts
  // only grow and spares only become active, so a rank that cannot serve now
  // never can later: every member is passed over at most once per layer.
  void prepareReserve(const std::vector<int>& live) {
    reserve_.resize(layers_.size());
    cursor_.resize(layers_.size());
    for (size_t k = 0; k < layers_.size(); ++k) {
      if ((layers_[k].flags & Layer::kReserve) != 0) {
        reserve_[k] = membersOf(t_, k, live);
        cursor_[k].assign(reserve_[k].start.begin(), reserve_[k].start.end() - 1);
      }
    }
  }

  bool promoteSpare(int failed, int hole) {
    for (size_t k = layers_.size(); k-- > 0;) {
      if ((layers_[k].flags & Layer::kReserve) == 0) {
        continue;
      }
      const auto dom = static_cast<size_t>(t_.of(k, failed));
      const Members& m = reserve_[k];
      int& pos = cursor_[k][dom];
      while (pos < m.start[dom + 1]) {
        const int i = m.ranks[static_cast<size_t>(pos)];
        if (world_.at(i).mode == Mode::kInactive && roomFor(i)) {
          break;  // in rank order: the lowest-ranked spare that fits
        }
        ++pos;
      }
      if (pos < m.start[dom + 1]) {
        const int best = m.ranks[static_cast<size_t>(pos++)];
        activate(best);
        world_.at(best).mode = Mode::kActive;
        world_.at(best).rank = hole;
        noteActiveRank(best);
        return true;
      }
    }
    return false;
  }

  // Backfill search: per BACKFILL layer and domain, a max-heap of
  // (rank, initial rank) of its active ranks; entries whose rank or mode has
  // changed since they were pushed are dropped when they reach the top.
  void prepareBackfill(const std::vector<int>& live) {
    heaps_.resize(layers_.size());
    for (size_t k = 0; k < layers_.size(); ++k) {
      if ((layers_[k].flags & Layer::kBackfill) == 0) {
        continue;
      }
      heaps_[k].assign(static_cast<size_t>(t_.domainCount[k]), {});
      for (auto it = live.rbegin(); it != live.rend(); ++it) {
        // Descending rank order: each row is already a max-heap.
        if (world_.at(*it).mode == Mode::kActive) {
          heaps_[k][static_cast<size_t>(t_.of(k, *it))].emplace_back(world_.at(*it).rank, *it);
        }
      }
    }
  }

  void noteActiveRank(int i) {
    for (size_t k = 0; k < layers_.size(); ++k) {
      if ((layers_[k].flags & Layer::kBackfill) != 0) {
        auto& h = heaps_[k][static_cast<size_t>(t_.of(k, i))];
        h.emplace_back(world_.at(i).rank, i);
        std::push_heap(h.begin(), h.end());
      }
    }
  }

  void backfill(int failed, int hole) {
    for (size_t k = layers_.size(); k-- > 0;) {
      if ((layers_[k].flags & Layer::kBackfill) == 0) {
        continue;
      }
      auto& h = heaps_[k][static_cast<size_t>(t_.of(k, failed))];
      while (!h.empty() && (world_.at(h.front().second).mode != Mode::kActive ||
                            world_.at(h.front().second).rank != h.front().first)) {
        std::pop_heap(h.begin(), h.end());
        h.pop_back();
      }
      if (!h.empty() && h.front().first > hole) {
        const int highest = h.front().second;
        world_.at(highest).rank = hole;  // its old entry is now stale
        noteActiveRank(highest);
        return;
      }
    }
  }

  const std::vector<Layer>& layers_;
  const TreeLayout& t_;
  World& world_;
  std::vector<std::vector<int>> counts_;  // active ranks per layer, per domain
  std::vector<Members> reserve_;
  std::vector<std::vector<int>> cursor_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> heaps_;
};

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
    const auto layout = cache_.get(layers_, world.initialWorldSize());
    Pass pass(layers_, *layout, world);
    pass.terminateSmallDomains();
    if (context.firstIteration || context.previous == nullptr) {
      pass.layOut();
    } else {
      pass.replaceFailed(*context.previous);
      pass.shift();
    }
    cutActive(world);
  }

 private:
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
  mutable detail::TreeLayoutCache cache_;
};

}  // namespace

RankAssignmentPtr tree(std::vector<Layer> layers, std::function<int(int activeCount)> filter) {
  return std::make_shared<Tree>(std::move(layers), std::move(filter));
}

}  // namespace resilient::restart
