// One generation of one barrier: which ranks are counted, who waits for the
// release, which surplus ranks tried to join. Pure bookkeeping, no locking;
// StoreEngine owns these.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "store/errors.h"

namespace resilient::store {

// A call waiting for a barrier's release: what its answer needs, kept in the
// barrier itself so that a release reads one contiguous array.
struct BarrierWaiter {
  uint64_t id = 0;     // the engine's pending id
  uint64_t owner = 0;  // as passed by the caller (connection, ...)
  uint64_t tag = 0;    // as passed by the caller (request id, ...)
  uint32_t arrivalIndex = 0;
};

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

  std::vector<BarrierWaiter>& waiters() noexcept { return waiters_; }
  // Removes one waiter id (timeout or disconnect).
  void removeWaiter(uint64_t id);

  BarrierReport report(const std::string& name, uint64_t generation) const;

 private:
  std::vector<uint8_t> counted_;
  uint32_t arrived_ = 0;
  std::set<int> surplus_;
  std::vector<BarrierWaiter> waiters_;
};

}  // namespace resilient::store
