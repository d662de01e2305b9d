// What the rank-assignment tests read off a World and how they run one
// assignment (shared by the unit, example and Tree tests).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "resilient/restart/rank_assignment.hpp"

namespace resilient::restart::test {

// One assignment of `policy` after `terminated` (optionally keyed, or the first).
inline World assign(const World& previous, const RankAssignmentPtr& policy,
                    std::vector<int> terminated, std::function<std::string(int)> key = {},
                    bool first = false) {
  AssignmentContext context;
  context.terminated = std::move(terminated);
  context.key = std::move(key);
  context.firstIteration = first;
  return assignRanks(previous, *policy, context);
}

// Each initial rank's rank in `w`.
inline std::vector<int> ranksOf(const World& w) {
  std::vector<int> out;
  for (int i = 0; i < w.initialWorldSize(); ++i) {
    out.push_back(w.at(i).rank);
  }
  return out;
}

// Each initial rank's mode in `w`.
inline std::vector<Mode> modesOf(const World& w) {
  std::vector<Mode> out;
  for (int i = 0; i < w.initialWorldSize(); ++i) {
    out.push_back(w.at(i).mode);
  }
  return out;
}

}  // namespace resilient::restart::test
