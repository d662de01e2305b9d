#include "restart/loop/job_barrier.h"

#include <algorithm>

#include "resilient/restart/errors.hpp"
#include "store/errors.h"

namespace resilient::restart {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

JobBarrier::JobBarrier(store::Store& store, const protocol::JobKeys& keys, int initialRank,
                       int worldSize, milliseconds chunk)
    : store_(store),
      keys_(keys),
      rank_(initialRank),
      worldSize_(worldSize),
      chunk_(chunk),
      terminated_(store, keys) {}

void JobBarrier::markTerminated(int rank, const std::string& reason) {
  protocol::markTerminated(store_, keys_, rank, reason);
}

void JobBarrier::countOnBehalf(const std::string& name, uint64_t generation, int rank) {
  store_.barrier({name, generation, rank, worldSize_, /*waitForRelease=*/false});
}

std::vector<int> JobBarrier::wait(const std::string& name, uint64_t generation,
                                  milliseconds timeout, const std::function<bool()>& stop,
                                  bool markMissing, std::optional<milliseconds> chunk) {
  const milliseconds slice = chunk.value_or(chunk_);
  const Clock::time_point deadline = Clock::now() + timeout;
  std::set<int> counted;
  for (;;) {
    for (const int r : terminated()) {
      if (r != rank_ && counted.insert(r).second) {
        countOnBehalf(name, generation, r);
      }
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    try {
      store_.barrier({name, generation, rank_, worldSize_, /*waitForRelease=*/true},
                     std::max(milliseconds(1), std::min(slice, left)));
      return {};
    } catch (const store::BarrierTimeout& e) {
      if (stop && stop()) {
        throw RankShouldRestart("interrupted while waiting at barrier " + name + " #" +
                                std::to_string(generation));
      }
      if (Clock::now() < deadline) {
        continue;
      }
      if (markMissing) {
        return e.missingRanks();
      }
      throw TimeoutError("barrier " + name + " #" + std::to_string(generation) +
                         " timed out after " + std::to_string(timeout.count()) +
                         " ms: " + e.what());
    } catch (const store::TimeoutError& e) {
      // The store's reply to one slice came late (a loaded store or host):
      // the barrier is re-entrant, so wait on until the barrier's own
      // deadline instead of failing the rank.
      if (stop && stop()) {
        throw RankShouldRestart("interrupted while waiting at barrier " + name + " #" +
                                std::to_string(generation));
      }
      if (Clock::now() < deadline) {
        continue;
      }
      throw TimeoutError("barrier " + name + " #" + std::to_string(generation) +
                         " timed out after " + std::to_string(timeout.count()) +
                         " ms: " + e.what());
    }
  }
}

}  // namespace resilient::restart
