// One generation of one barrier: which ranks are counted, who waits for the
// release, which surplus ranks tried to join. Pure bookkeeping, no locking;
// StoreEngine owns these.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "restart/store/errors.h"

namespace resilient::store {

class BarrierState {
 public:
  explicit BarrierState(int worldSize);

  int worldSize() const noexcept { return static_cast<int>(counted_.size()); }
  uint32_t arrived() const noexcept { return arrived_; }
  bool complete() const noexcept { return arrived_ == counted_.size(); }

  // Counts `rank` (0 <= rank < worldSize). Returns its 1-based arrival index,
  // or 0 when it was already counted.
  uint32_t count(int rank);
  // Records a rank outside [0, worldSize) (kept for error reports, capped).
  void recordSurplus(int rank);

  std::vector<uint64_t>& waiters() noexcept { return waiters_; }
  // Removes one waiter id (timeout or disconnect).
  void removeWaiter(uint64_t id);

  BarrierReport report(const std::string& name, uint64_t generation) const;

 private:
  std::vector<uint8_t> counted_;
  uint32_t arrived_ = 0;
  std::set<int> surplus_;
  std::vector<uint64_t> waiters_;
};

}  // namespace resilient::store
