#include "store/barrier_state.h"

#include <algorithm>

namespace resilient::store {
namespace {
constexpr size_t kMaxSurplusRecorded = 1024;
}

BarrierState::BarrierState(int worldSize) : counted_(static_cast<size_t>(worldSize), 0) {}

uint32_t BarrierState::count(int rank) {
  uint8_t& slot = counted_.at(static_cast<size_t>(rank));
  if (slot != 0) {
    return 0;
  }
  slot = 1;
  return ++arrived_;
}

void BarrierState::recordSurplus(int rank) {
  if (surplus_.size() < kMaxSurplusRecorded) {
    surplus_.insert(rank);
  }
}

void BarrierState::removeWaiter(uint64_t id) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [id](const BarrierWaiter& w) { return w.id == id; });
  if (it != waiters_.end()) {
    *it = waiters_.back();
    waiters_.pop_back();
  }
}

BarrierReport BarrierState::report(const std::string& name, uint64_t generation) const {
  BarrierReport r;
  r.name = name;
  r.generation = generation;
  r.worldSize = worldSize();
  r.arrived = arrived_;
  for (size_t i = 0; i < counted_.size(); ++i) {
    if (counted_[i] == 0) {
      r.missingRanks.push_back(static_cast<int>(i));
    }
  }
  r.surplusRanks.assign(surplus_.begin(), surplus_.end());
  return r;
}

}  // namespace resilient::store
