// The soft and hard timeouts (docs/reference/restart-model.md §1.1, MonitorProcess): pure
// decisions over what the status page shows, so they are tested without
// processes or clocks.
//
//  - progress: StatusPage::lastProgressNs (the rank stamps autoProgressNs at
//    every phase change, so the clock restarts there), and never earlier
//    than the monitor's start or the last time hang protection was seen off;
//  - soft timeout: phase kRunning, hang protection on, no progress for the
//    soft timeout → kSoft, at most once per iteration;
//  - hard timeout: any phase but those after the loop (leftTheLoop), hang protection on, no
//    progress for the hard timeout → kHard; while the rank waits in a barrier
//    (initial, iteration, completion) the limit is the barrier timeout.
#pragma once

#include <chrono>
#include <cstdint>

#include "restart/protocol/status_page.h"

namespace resilient::restart::monitor {

struct ProgressView {
  protocol::RankPhase phase = protocol::RankPhase::kStarting;
  int iteration = 0;
  uint64_t lastProgressNs = 0;
  bool hangProtectionOff = false;

  static ProgressView of(const protocol::StatusPage& page) noexcept;
};

enum class TimeoutAction { kNone, kSoft, kHard };

class ProgressTimeouts {
 public:
  ProgressTimeouts(std::chrono::milliseconds soft, std::chrono::milliseconds hard,
                   std::chrono::milliseconds barrier, uint64_t startMonoNs);

  // What is due now. kSoft is returned until softDone(iteration) is called.
  TimeoutAction check(const ProgressView& view, uint64_t nowMonoNs);
  // The soft timeout of `iteration` was enforced.
  void softDone(int iteration) noexcept { softIteration_ = iteration; }
  // How long the rank has shown no progress, and the hard limit that applies
  // in `phase` (for log lines and records).
  uint64_t idleNs(const ProgressView& view, uint64_t nowMonoNs) const noexcept;
  uint64_t hardLimitNs(protocol::RankPhase phase) const noexcept;
  uint64_t softLimitNs() const noexcept { return softNs_; }

 private:
  uint64_t softNs_;
  uint64_t hardNs_;
  uint64_t barrierNs_;
  uint64_t baselineNs_;  // monitor start, or the last time protection was seen off
  int softIteration_ = -1;
};

}  // namespace resilient::restart::monitor
