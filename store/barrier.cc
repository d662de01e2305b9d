#include "store/barrier.h"

#include <utility>

namespace resilient::store {

Barrier::Barrier(Store& store, std::string name, int worldSize, uint64_t firstGeneration)
    : store_(store), name_(std::move(name)), worldSize_(worldSize), generation_(firstGeneration) {}

BarrierResult Barrier::arriveAndWait(int rank, Timeout timeout) {
  const uint64_t generation = generation_++;
  return arriveAt(generation, rank, timeout);
}

BarrierResult Barrier::arriveAt(uint64_t generation, int rank, Timeout timeout) {
  return store_.barrier({name_, generation, rank, worldSize_, true}, timeout);
}

BarrierResult Barrier::mark(uint64_t generation, int rank, Timeout timeout) {
  return store_.barrier({name_, generation, rank, worldSize_, false}, timeout);
}

}  // namespace resilient::store
