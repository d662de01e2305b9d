#include "restart/loop/job/barrier.h"

#include "resilient/restart/errors.hpp"
#include "restart/loop/sliced_wait.h"
#include "store/errors.h"

namespace resilient::restart {

using std::chrono::milliseconds;

JobBarrier::JobBarrier(store::Store& store, const protocol::JobKeys& keys,
                       const JobBarrierOptions& options)
    : store_(store),
      keys_(keys),
      rank_(options.initialRank),
      worldSize_(options.worldSize),
      chunk_(options.chunk),
      storeSilence_(options.storeSilence),
      progress_(options.progress),
      terminated_(store, keys),
      terminatedSeen_(options.terminatedSeen) {}

const std::set<int>& JobBarrier::terminated() {
  const std::set<int>& ranks = terminated_.refresh();
  if (ranks.size() != seen_) {
    seen_ = ranks.size();
    if (terminatedSeen_) {
      terminatedSeen_(ranks);
    }
  }
  return ranks;
}

void JobBarrier::markTerminated(int rank, const std::string& reason) {
  protocol::markTerminated(store_, keys_, rank, reason);
}

void JobBarrier::countOnBehalf(const std::string& name, uint64_t generation, int rank) {
  store_.barrier({name, generation, rank, worldSize_, /*waitForRelease=*/false});
}

bool JobBarrier::completed(const std::string& name, uint64_t generation) {
  return store_.barrier({name, generation, rank_, worldSize_, /*waitForRelease=*/false}).completed;
}

std::vector<int> JobBarrier::wait(const std::string& name, uint64_t generation,
                                  milliseconds timeout, const std::function<bool()>& stop,
                                  const WaitOptions& options) {
  const std::string what = "barrier " + name + " #" + std::to_string(generation);
  std::set<int> counted;
  uint64_t listRestarts = terminated_.restarts();
  using Clock = std::chrono::steady_clock;
  // The first unanswered slice of a silent store (epoch: the store answers).
  Clock::time_point silentSince{};
  // A slice without the store's answer: StoreUnavailable once they have
  // lasted storeSilence.
  const auto noteSilence = [&](const store::StoreError& e) {
    const auto now = Clock::now();
    if (silentSince == Clock::time_point{}) {
      silentSince = now;
    } else if (storeSilence_.count() > 0 && now - silentSince >= storeSilence_) {
      throw StoreUnavailable(what + ": the store " + store_.describe() + " has not answered for " +
                             std::to_string(storeSilence_.count()) + " ms: " + e.what());
    }
  };
  // A slice ends in a BarrierTimeout, or in another store::TimeoutError when
  // the store's reply to it came late (a loaded store or host): the barrier
  // is re-entrant, so either way the wait goes on to its own deadline.
  return waitInSlices<store::TimeoutError>(
      timeout, options.chunk.value_or(chunk_),
      [&](const auto& sliceTime) {
        try {
          const std::set<int>& ranks = terminated();
          if (terminated_.restarts() != listRestarts) {
            // The store restarted empty: what was counted for others went
            // with it (this rank's own arrival is sent again by the store
            // client).
            listRestarts = terminated_.restarts();
            counted.clear();
          }
          for (const int r : ranks) {
            // Only the World's slots: a rank past them is a process that
            // ended while joining the job, counted once an admission makes it
            // a slot (restart/loop/job/joiners.h); counted now it would be a
            // surplus arrival that fails every rank's wait.
            if (r != rank_ && r < worldSize_ && (!options.onBehalf || options.onBehalf(r)) &&
                counted.insert(r).second) {
              countOnBehalf(name, generation, r);
            }
          }
          store_.barrier({name, generation, rank_, worldSize_, /*waitForRelease=*/true},
                         sliceTime());
          return std::vector<int>{};
        } catch (const store::BarrierTimeout&) {
          silentSince = {};  // the store answered: not yet complete
          throw;
        } catch (const store::TimeoutError& e) {
          noteSilence(e);
          throw;
        } catch (const store::ConnectionLost& e) {
          // The connection went during the slice (the store restarted, or
          // the node proxy closed its old instance's connections) and the
          // call's slice ran out before the client sent it again: a slice
          // the store did not answer, as a late reply is; the next slice
          // reconnects (the barrier is re-entrant). It ended a spare's wait,
          // 10 ms slices, and so the torch drill's job, after a store kill.
          noteSilence(e);
          throw store::TimeoutError(e.what());
        }
      },
      [&] {
        if (progress_) {
          progress_();
        }
        if (stop && stop()) {
          throw RankShouldRestart("interrupted while waiting at " + what);
        }
      },
      [&](const store::TimeoutError& e) {
        const auto* missing = dynamic_cast<const store::BarrierTimeout*>(&e);
        if (missing == nullptr) {
          // The last slice did not even get the store's answer.
          throw StoreUnavailable(what + ": the store " + store_.describe() +
                                 " did not answer within " + std::to_string(timeout.count()) +
                                 " ms: " + e.what());
        }
        if (options.markMissing) {
          return missing->missingRanks();
        }
        throw TimeoutError(what + " timed out after " + std::to_string(timeout.count()) +
                           " ms: " + e.what());
      });
}

}  // namespace resilient::restart
