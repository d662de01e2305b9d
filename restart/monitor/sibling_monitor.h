// The sibling monitor (docs/reference/restart-model.md §1.1, SiblingMonitor): each monitor
// watches the heartbeat of the next rank in the ring that is not
// terminated. When that heartbeat is missing it reads every heartbeat and
// terminated key at one instant (multiGet) and names every rank whose
// heartbeat is missing and that is not terminated: a whole node (rank and
// monitor) is gone. A rank's heartbeat only counts as missing after this
// monitor saw it once, or once the heartbeat timeout has passed since the
// monitor started (a slow starter is not dead).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart::monitor {

struct SiblingMonitorOptions {
  int self = 0;       // this monitor's rank
  int worldSize = 0;  // the job's initial world size
  store::Millis heartbeatTimeout{0};
  uint64_t startMonoNs = 0;  // when the monitor started (monotonicNs)
  store::Timeout callTimeout{};
  // Counts the store's restarts (its client's onServerRestart; may be null):
  // a restarted store has no heartbeat until the monitors beat again, so the
  // count starts over as at the monitor's start.
  const std::atomic<uint64_t>* storeRestarts = nullptr;
  // The slots of the rank's World (its status page; may be null): the ring
  // grows as processes join the job, each new rank with its own grace.
  const std::atomic<int32_t>* slots = nullptr;
};

class SiblingMonitor {
 public:
  SiblingMonitor(store::Store& store, const protocol::JobKeys& keys,
                 const SiblingMonitorOptions& options);

  // One check (one get; a multiGet when the watched heartbeat is missing).
  // Returns the unresponsive ranks, ascending (usually none). Throws
  // store::StoreError.
  std::vector<int> check(uint64_t nowMonoNs);
  // The rank watched now; -1 when no other rank is left.
  int watched() const noexcept { return watched_; }

 private:
  bool countsAsMissing(int rank, uint64_t nowMonoNs) const;
  // Whether the store restarted since the last look (then starts over).
  bool storeRestarted(uint64_t nowMonoNs);
  // Takes in the ranks that joined the job since the last look.
  void grow(uint64_t nowMonoNs);
  std::vector<int> sweep(uint64_t nowMonoNs);
  int nextAlive(const std::vector<bool>& out) const;

  store::Store& store_;
  const protocol::JobKeys& keys_;
  int self_;
  int worldSize_;
  uint64_t heartbeatTimeoutNs_;
  store::Timeout timeout_;
  const std::atomic<uint64_t>* storeRestarts_;
  const std::atomic<int32_t>* slots_;
  uint64_t restartsSeen_ = 0;
  // Per rank: since when its heartbeat may count as missing without having
  // been seen (this monitor's start, the rank's joining, the store's restart).
  std::vector<uint64_t> sinceNs_;
  std::vector<bool> seen_;
  std::vector<bool> terminated_;
  int watched_;
};

}  // namespace resilient::restart::monitor
