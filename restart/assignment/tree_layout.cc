#include "tree_layout.hpp"

#include <functional>
#include <numeric>
#include <string>
#include <unordered_map>

namespace resilient::restart::detail {
namespace {

// (parent domain, key) -> domain id.
struct DomainKey {
  int parent;
  std::string key;
  bool operator==(const DomainKey& o) const { return parent == o.parent && key == o.key; }
};

struct DomainKeyHash {
  size_t operator()(const DomainKey& k) const noexcept {
    return std::hash<std::string>{}(k.key) * 31u + static_cast<size_t>(k.parent);
  }
};

}  // namespace

TreeLayout buildTreeLayout(const std::vector<Layer>& layers, int initialWorldSize) {
  const auto n = static_cast<size_t>(initialWorldSize);
  TreeLayout t;
  t.initialWorldSize = initialWorldSize;
  t.domain.assign(layers.size(), std::vector<int>(n, 0));
  t.domainCount.assign(layers.size(), 1);
  for (size_t k = 1; k < layers.size(); ++k) {
    std::unordered_map<DomainKey, int, DomainKeyHash> ids;
    ids.reserve(n);
    DomainKey last{-1, {}};
    int lastId = -1;
    for (size_t i = 0; i < n; ++i) {
      DomainKey key{t.domain[k - 1][i], layers[k].key(static_cast<int>(i))};
      // Ids in order of first appearance, i.e. of the domains' lowest ranks; a
      // hash lookup only when the domain differs from the previous rank's.
      if (lastId < 0 || !(key == last)) {
        const auto [it, added] = ids.emplace(key, static_cast<int>(ids.size()));
        lastId = it->second;
        last = std::move(key);
      }
      t.domain[k][i] = lastId;
    }
    t.domainCount[k] = static_cast<int>(ids.size());
  }
  // Depth-first order: a stable counting sort by each layer's domain, from the
  // deepest layer to the root, of the ranks in initial order.
  t.depthFirst.resize(n);
  std::iota(t.depthFirst.begin(), t.depthFirst.end(), 0);
  std::vector<int> sorted(n);
  for (size_t k = layers.size(); k-- > 1;) {
    std::vector<int> start(static_cast<size_t>(t.domainCount[k]) + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      ++start[static_cast<size_t>(t.domain[k][i]) + 1];
    }
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (const int i : t.depthFirst) {
      sorted[static_cast<size_t>(start[static_cast<size_t>(t.of(k, i))]++)] = i;
    }
    t.depthFirst.swap(sorted);
  }
  return t;
}

std::shared_ptr<const TreeLayout> TreeLayoutCache::get(const std::vector<Layer>& layers,
                                                       int initialWorldSize) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!layout_ || layout_->initialWorldSize != initialWorldSize) {
    layout_ = std::make_shared<const TreeLayout>(buildTreeLayout(layers, initialWorldSize));
  }
  return layout_;
}

}  // namespace resilient::restart::detail
