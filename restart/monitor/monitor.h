// The monitor process's loop (docs/reference/restart-model.md §1.1, MonitorProcess with its
// Heartbeat and SiblingMonitor threads folded into one loop): every interval
// it keeps its rank's heartbeat, enforces the soft and hard timeouts and
// checks its sibling; between checks it sleeps on the rank's pidfd, so the
// rank's death is seen at once, and on the news of its liveness link with
// the rank (liveness_watch.h: a thread of its own pings the rank every
// quarter of NCCL_RESILIENT_LIVENESS_TIMEOUT_MS with the net plugin's
// liveness frames and rules): a rank that answers nothing for that long is
// frozen, recorded as unresponsive in
// the net plugin's words and killed at once (SIGKILL: a frozen process runs
// no handler), whatever the job's topology and framework. docs/restart.md, "Monitor process", lists
// what it writes to the store.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "restart/monitor/fault_publisher.h"
#include "restart/monitor/heartbeat.h"
#include "restart/monitor/liveness_watch.h"
#include "restart/monitor/monitor_config.h"
#include "restart/monitor/monitor_log.h"
#include "restart/monitor/progress_timeouts.h"
#include "restart/monitor/rank_process.h"
#include "restart/monitor/sibling_monitor.h"
#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/status_page.h"
#include "store/store.h"

namespace resilient::restart::monitor {

// Exit codes of resilient-monitor.
inline constexpr int kMonitorExitOk = 0;  // rank done, gone after done/failed, or death recorded
inline constexpr int kMonitorExitFailed = 1;  // the monitor itself failed (rank left alone)

class Monitor {
 public:
  // `config.storeTimeout` must be set (> 0): how long the store may fail
  // before the monitor gives up.
  // `storeRestarts`: counts the store's restarts (its client follows them;
  // may be null).
  Monitor(const MonitorConfig& config, store::Store& store, protocol::StatusPage& page,
          MonitorLog& log, const std::atomic<uint64_t>* storeRestarts = nullptr);

  // Runs until the rank is done or gone, or the monitor fails; returns the
  // exit code.
  int run();

 private:
  // One pass of the periodic work; returns true when the monitor is finished
  // (*exitCode set).
  bool tick(uint64_t nowNs, int* exitCode);
  void enforceSoftTimeout(const ProgressView& view, uint64_t idleNs);
  int enforceHardTimeout(const ProgressView& view, uint64_t idleNs);
  // The liveness link's news: returns the exit code once a frozen rank was
  // killed, -1 otherwise.
  int watchLiveness();
  // Records why the monitor ends its rank (before the kill, so that the
  // survivors learn why), kills it (SIGTERM and the grace first when
  // `graceful`) and records its end.
  // `what`: the timeout that expired, for the log and the record ("hard
  // timeout", "liveness timeout").
  int terminate(protocol::FaultReason reason, const char* what, const std::string& detail,
                int iteration, bool graceful);
  void checkSibling(uint64_t nowNs);
  // How the rank's process ended: by itself, or killed by this monitor.
  // kExiting: on its way out, its teardown still running (RankProcess::exiting).
  enum class RankEnd { kByItself, kExiting, kKilledByMonitor };
  // The rank's process ended: records it unless it had finished.
  int onRankEnded(RankEnd end);
  // Its records of the rank's end, once: the terminated mark, the fault
  // record (with a mark this call set), the barrier counts, the
  // interruption. Throws store::StoreError.
  void recordEnd(int iteration, protocol::RankPhase phase, const std::string& detail,
                 uint64_t seenWallNs, uint64_t deadline);
  int cleanExit(const char* why);
  int quietExit();  // a withdrawn rank: nothing written to the store
  // Whether the rank is a spare in its current iteration (its status page).
  bool spare() const noexcept { return page_.spare.load(std::memory_order_acquire) != 0; }
  // The size of the rank's barriers now (the slots of its World; the job's
  // initial world size until the rank set them).
  int barrierSlots() const noexcept {
    const int slots = page_.slots.load(std::memory_order_acquire);
    return slots > 0 ? slots : config_.worldSize;
  }
  int fail(const std::string& why);
  // Runs `step` until it succeeds or `deadline` (monotonic ns) passes (rethrows then).
  template <typename Fn>
  void retrying(const char* what, uint64_t deadline, Fn&& step);
  // Whether the rank, which ended in phase failed, marked itself terminated
  // (Loop::leave) before it ended, as read by `deadline` (monotonic ns).
  bool leftWithItsOwnRecord(uint64_t deadline);
  // After a death is recorded: until `until` (monotonic ns), marks the rank
  // terminated again on a restarted store that lost the mark.
  void keepTheMark(uint64_t until);
  // The store's restarts its client followed so far (0 without a counter).
  uint64_t storeRestartsSeen() const noexcept {
    return storeRestarts_ != nullptr ? storeRestarts_->load() : 0;
  }
  protocol::FaultRecord record(protocol::FaultReason reason, int subject,
                               const std::string& detail) const;

  MonitorConfig config_;
  const std::atomic<uint64_t>* storeRestarts_;  // may be null
  store::Store& store_;
  protocol::StatusPage& page_;
  MonitorLog& log_;
  protocol::JobKeys keys_;
  uint64_t startNs_;
  store::Timeout callTimeout_;
  FaultPublisher publisher_;
  Heartbeat heartbeat_;
  SiblingMonitor sibling_;
  ProgressTimeouts timeouts_;
  RankProcess rank_;
  std::optional<LivenessWatch> liveness_;  // none without --liveness-fd
  bool linkEndLogged_ = false;
  protocol::FaultReason killReason_ = protocol::FaultReason::kHardTimeout;
  std::string killWhat_;
  uint64_t nextCheckNs_ = 0;
  uint64_t storeFailingSinceNs_ = 0;
  uint64_t storeReportedNs_ = 0;  // when the failing store was last logged
};

}  // namespace resilient::restart::monitor
