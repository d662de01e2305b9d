#include "resilient/restart/rank_assignment.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace resilient::restart {
namespace {

class ShiftRanks final : public RankAssignment {
 public:
  void apply(World& world, const AssignmentContext& /*context*/) const override {
    int next = 0;
    for (const int i : world.liveByRank()) {
      world.at(i).rank = next++;
    }
  }
  std::string describe() const override { return "ShiftRanks"; }
};

class FillGaps final : public RankAssignment {
 public:
  void apply(World& world, const AssignmentContext& /*context*/) const override {
    const std::vector<int> live = world.liveByRank();
    const int n = static_cast<int>(live.size());
    std::vector<bool> taken(static_cast<size_t>(n), false);
    std::vector<int> movers;
    for (const int i : live) {
      const int r = world.at(i).rank;
      if (r >= 0 && r < n) {
        taken[static_cast<size_t>(r)] = true;
      } else {
        movers.push_back(i);  // in rank order
      }
    }
    size_t hole = 0;
    for (const int i : movers) {
      while (taken[hole]) {
        ++hole;
      }
      world.at(i).rank = static_cast<int>(hole);
      taken[hole] = true;
    }
  }
  std::string describe() const override { return "FillGaps"; }
};

class ActivateAll final : public RankAssignment {
 public:
  void apply(World& world, const AssignmentContext& /*context*/) const override {
    for (int i = 0; i < world.initialWorldSize(); ++i) {
      if (!world.terminated(i)) {
        world.at(i).mode = Mode::kActive;
      }
    }
  }
  std::string describe() const override { return "ActivateAllRanks"; }
};

// Keeps the first `keep(activeCount)` active ranks (rank order) active.
class CutActive final : public RankAssignment {
 public:
  CutActive(std::function<int(int)> keep, std::string name)
      : keep_(std::move(keep)), name_(std::move(name)) {}
  void apply(World& world, const AssignmentContext& /*context*/) const override {
    std::vector<int> active;
    for (const int i : world.liveByRank()) {
      if (world.at(i).mode == Mode::kActive) {
        active.push_back(i);
      }
    }
    const int keep = keep_(static_cast<int>(active.size()));
    for (size_t k = static_cast<size_t>(std::max(keep, 0)); k < active.size(); ++k) {
      world.at(active[k]).mode = Mode::kInactive;
    }
  }
  std::string describe() const override { return name_; }

 private:
  std::function<int(int)> keep_;
  std::string name_;
};

class FilterGrouped final : public RankAssignment {
 public:
  FilterGrouped(std::function<bool(int)> condition, std::string description)
      : condition_(std::move(condition)), description_(std::move(description)) {}
  void apply(World& world, const AssignmentContext& context) const override {
    if (!context.key) {
      throw AssignmentError(describe() + " needs a key per rank (the rank registry)");
    }
    // Group ids in order of first appearance; one key call per live rank, a
    // hash lookup only when the key differs from the previous rank's (groups
    // such as hosts are usually runs of consecutive ranks).
    const int n = world.initialWorldSize();
    std::unordered_map<std::string, int> ids;
    std::vector<int> group(static_cast<size_t>(n), -1);
    std::vector<int> liveCount;
    std::string last;
    int lastId = -1;
    for (int i = 0; i < n; ++i) {
      if (world.terminated(i)) {
        continue;
      }
      std::string key = context.key(i);
      if (lastId < 0 || key != last) {
        const auto [it, added] = ids.try_emplace(key, static_cast<int>(ids.size()));
        if (added) {
          liveCount.push_back(0);
        }
        lastId = it->second;
        last = std::move(key);
      }
      group[static_cast<size_t>(i)] = lastId;
      ++liveCount[static_cast<size_t>(lastId)];
    }
    std::vector<char> keep(liveCount.size());
    for (size_t g = 0; g < liveCount.size(); ++g) {
      keep[g] = condition_(liveCount[g]) ? 1 : 0;
    }
    for (int i = 0; i < n; ++i) {
      RankSlot& s = world.at(i);
      if (s.mode == Mode::kActive && keep[static_cast<size_t>(group[static_cast<size_t>(i)])] == 0) {
        s.mode = Mode::kInactive;
      }
    }
  }
  std::string describe() const override { return "FilterCountGroupedByKey(" + description_ + ")"; }

 private:
  std::function<bool(int)> condition_;
  std::string description_;
};

class Composed final : public RankAssignment {
 public:
  explicit Composed(std::vector<RankAssignmentPtr> policies) : policies_(std::move(policies)) {}
  void apply(World& world, const AssignmentContext& context) const override {
    for (auto it = policies_.rbegin(); it != policies_.rend(); ++it) {
      (*it)->apply(world, context);
    }
  }
  std::string describe() const override {
    std::string text = "Compose(";
    for (size_t i = 0; i < policies_.size(); ++i) {
      text += (i > 0 ? ", " : "") + policies_[i]->describe();
    }
    return text + ")";
  }

 private:
  std::vector<RankAssignmentPtr> policies_;
};

}  // namespace

RankAssignmentPtr shiftRanks() {
  return std::make_shared<ShiftRanks>();
}

RankAssignmentPtr fillGaps() {
  return std::make_shared<FillGaps>();
}

RankAssignmentPtr activateAllRanks() {
  return std::make_shared<ActivateAll>();
}

RankAssignmentPtr maxActiveWorldSize(int maxActive) {
  if (maxActive < 1) {
    throw std::invalid_argument("maxActiveWorldSize needs at least 1, not " +
                                std::to_string(maxActive));
  }
  return std::make_shared<CutActive>([maxActive](int n) { return std::min(n, maxActive); },
                                     "MaxActiveWorldSize(" + std::to_string(maxActive) + ")");
}

RankAssignmentPtr activeWorldSizeDivisibleBy(int divisor) {
  if (divisor < 1) {
    throw std::invalid_argument("activeWorldSizeDivisibleBy needs a divisor >= 1, not " +
                                std::to_string(divisor));
  }
  return std::make_shared<CutActive>([divisor](int n) { return n - n % divisor; },
                                     "ActiveWorldSizeDivisibleBy(" + std::to_string(divisor) + ")");
}

RankAssignmentPtr filterCountGroupedByKey(std::function<bool(int liveCount)> condition,
                                          std::string description) {
  if (!condition) {
    throw std::invalid_argument("filterCountGroupedByKey needs a condition");
  }
  return std::make_shared<FilterGrouped>(std::move(condition), std::move(description));
}

RankAssignmentPtr compose(std::vector<RankAssignmentPtr> policies) {
  for (const auto& p : policies) {
    if (!p) {
      throw std::invalid_argument("compose() got a null policy");
    }
  }
  return std::make_shared<Composed>(std::move(policies));
}

RankAssignmentPtr defaultRankAssignment() {
  return compose({activateAllRanks(), shiftRanks()});
}

World assignRanks(const World& previous, const RankAssignment& policy,
                  const AssignmentContext& context) {
  World next = previous;
  next.addSpares(context.joined);
  for (const int i : context.terminated) {
    if (i < 0 || i >= next.initialWorldSize()) {
      throw AssignmentError("terminated rank " + std::to_string(i) +
                            " is not an initial rank of a " +
                            std::to_string(next.initialWorldSize()) + "-rank job");
    }
    next.terminate(i);
  }
  AssignmentContext withPrevious = context;
  withPrevious.previous = &previous;
  policy.apply(next, withPrevious);
  next.renumberActive();
  if (std::string why = next.inconsistency(); !why.empty()) {
    throw AssignmentError(policy.describe() + " left an inconsistent world: " + why);
  }
  return next;
}

}  // namespace resilient::restart
