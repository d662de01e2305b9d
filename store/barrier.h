// Barrier: the convenient face of Store::barrier for one named barrier that
// a fixed set of ranks passes again and again. Each call uses the next
// generation, so ranks that call it once per round stay in step; the restart
// loop may instead pass its iteration number explicitly (arriveAt). The store
// does the counting and the release: one request per arriving rank, one
// answer per waiter, no polling.
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace resilient::store {

class Barrier {
 public:
  Barrier(Store& store, std::string name, int worldSize, uint64_t firstGeneration = 0);

  // Counts `rank` in the next generation and waits until every rank is
  // counted. The generation advances whatever the outcome.
  BarrierResult arriveAndWait(int rank, Timeout timeout = {});
  // The same for an explicit generation (does not touch the counter).
  BarrierResult arriveAt(uint64_t generation, int rank, Timeout timeout = {});
  // Counts `rank` in `generation` on its behalf and returns at once: a
  // monitor completing the barrier for a rank that died.
  BarrierResult mark(uint64_t generation, int rank, Timeout timeout = {});

  // The generation the next arriveAndWait() uses.
  uint64_t generation() const noexcept { return generation_; }
  const std::string& name() const noexcept { return name_; }
  int worldSize() const noexcept { return worldSize_; }

 private:
  Store& store_;
  std::string name_;
  int worldSize_;
  uint64_t generation_;
};

}  // namespace resilient::store
