// The loop's barriers over every initial rank of the job (initial,
// iteration, completion, termination). Re-entrant: a rank terminated for
// good is counted on its behalf by every rank that waits (and by the monitor
// process of a rank that just died), so the survivors never wait for it.
// The wait proceeds in chunks; between chunks the terminated set is read
// again, the rank shows progress to its monitor (waiting for others is not
// hanging: a frozen rank shows none) and an interruption check may end the
// wait. A slice whose connection was lost (a store restart) is one without
// an answer. A store that gives no answer for `storeSilence` ends it with
// StoreUnavailable, whatever the wait's own timeout (a spare's is a year).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "restart/protocol/job_keys.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/store.h"

namespace resilient::restart {

struct JobBarrierOptions {
  int initialRank = 0;
  int worldSize = 0;                          // the job's initial world size
  std::chrono::milliseconds chunk{0};         // the longest store wait between two checks
  std::chrono::milliseconds storeSilence{0};  // 0: no limit but the wait's timeout
  std::function<void()> progress;             // between chunks (may be empty)
  // Given the terminated ranks read whenever the set grew (may be empty).
  std::function<void(const std::set<int>&)> terminatedSeen;
};

class JobBarrier {
 public:
  JobBarrier(store::Store& store, const protocol::JobKeys& keys, const JobBarrierOptions& options);

  // Waits at `name`/`generation` for at most `timeout`. `stop` (may be empty)
  // is asked between chunks; when it returns true the wait ends with
  // RankShouldRestart. At the deadline: see WaitOptions::markMissing.
  struct WaitOptions {
    // The ranks still missing at the deadline are returned (the caller
    // declares them dead and calls again); otherwise TimeoutError names them.
    bool markMissing = false;
    // Replaces the barrier's own chunk for this wait.
    std::optional<std::chrono::milliseconds> chunk = std::nullopt;
    // Which terminated ranks this wait counts on their behalf (empty: all).
    // The completion barrier leaves out the iteration's active ranks: one
    // that left before its function returned did not do its part.
    std::function<bool(int)> onBehalf = nullptr;
  };
  std::vector<int> wait(const std::string& name, uint64_t generation,
                        std::chrono::milliseconds timeout, const std::function<bool()>& stop,
                        const WaitOptions& options);
  std::vector<int> wait(const std::string& name, uint64_t generation,
                        std::chrono::milliseconds timeout, const std::function<bool()>& stop) {
    return wait(name, generation, timeout, stop, WaitOptions{});
  }

  // Counts `rank` at the barrier without waiting (for a rank that is gone).
  void countOnBehalf(const std::string& name, uint64_t generation, int rank);
  // Whether the barrier has completed (this rank's arrival, already counted
  // by a wait, is counted again: idempotent).
  bool completed(const std::string& name, uint64_t generation);

  // The barriers' size from now on: the slots of the current World (it grows
  // as processes join the job).
  void setWorldSize(int worldSize) noexcept { worldSize_ = worldSize; }

  // The initial ranks terminated so far.
  const std::set<int>& terminated();
  // Marks `rank` terminated with `reason` (idempotent: the first reason stays).
  void markTerminated(int rank, const std::string& reason);

 private:
  store::Store& store_;
  const protocol::JobKeys& keys_;
  int rank_;
  int worldSize_;
  std::chrono::milliseconds chunk_;
  std::chrono::milliseconds storeSilence_;
  std::function<void()> progress_;
  protocol::TerminatedRanks terminated_;
  std::function<void(const std::set<int>&)> terminatedSeen_;
  size_t seen_ = 0;
};

}  // namespace resilient::restart
