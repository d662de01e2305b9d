// The shape of a Tree for one job size, computed once from the layers' keys
// and reused by every assignment: the domain of each initial rank at each
// layer (small integers instead of key strings) and the depth-first order of
// the ranks. Internal to restart/assignment.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "resilient/restart/tree.hpp"

namespace resilient::restart::detail {

struct TreeLayout {
  int initialWorldSize = 0;
  // domain[k][i]: initial rank i's domain at layer k, numbered 0.. in the
  // order of the domains' lowest initial ranks (the root is domain 0).
  std::vector<std::vector<int>> domain;
  std::vector<int> domainCount;  // per layer
  // Every initial rank, depth-first: by domain at layer 0, 1, ..., then rank.
  std::vector<int> depthFirst;

  int of(size_t layer, int initialRank) const {
    return domain[layer][static_cast<size_t>(initialRank)];
  }
};

// Evaluates each layer's key once per initial rank.
TreeLayout buildTreeLayout(const std::vector<Layer>& layers, int initialWorldSize);

// Keeps the layout of the last job size asked for; thread-safe (ranks run as
// threads in tests share one policy).
class TreeLayoutCache {
 public:
  std::shared_ptr<const TreeLayout> get(const std::vector<Layer>& layers, int initialWorldSize);

 private:
  std::mutex mutex_;
  std::shared_ptr<const TreeLayout> layout_;
};

}  // namespace resilient::restart::detail
