// What a monitor process is told: the rank it watches, the job's store and
// the timeouts it enforces (docs/reference/restart-model.md §1.2: monitor_process_interval,
// heartbeat_interval/timeout, soft/hard/barrier timeouts,
// termination_grace_time, the log and pid files). One struct for both sides:
// the loop fills it and spawn.h turns it into the command line that
// `resilient-monitor` parses back (command_line.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace resilient::restart::monitor {

using Millis = std::chrono::milliseconds;

struct MonitorConfig {
  int statusFd = -1;  // the rank's status page (protocol/status_page.h), inherited
  // The monitor's end of its liveness link with the rank (a connected stream
  // socket, inherited; -1: none): the monitor pings the rank through it and
  // a rank silent for NCCL_RESILIENT_LIVENESS_TIMEOUT_MS is frozen
  // (restart/loop/monitoring/rank_liveness.h).
  int livenessFd = -1;
  std::string storeUrl;   // openStore's URL
  std::string jobId;      // protocol::JobKeys
  int rank = -1;          // the watched rank's initial rank
  int worldSize = 0;      // the job's initial world size
  Millis interval{1000};  // how often it checks its rank, the timeouts and its sibling
  Millis heartbeatInterval{1000};
  Millis heartbeatTimeout{30000};
  Millis softTimeout{60000};
  Millis hardTimeout{90000};
  Millis barrierTimeout{120000};
  Millis grace{5000};  // SIGTERM → SIGKILL
  // How long the store may stay unreachable before the monitor gives up
  // (0: the store's default, NCCL_RESILIENT_STORE_TIMEOUT_MS).
  Millis storeTimeout{0};
  // "{rank}" is replaced by the rank; empty: none. The log file receives the
  // monitor's lines (stderr otherwise); the post-mortem dump goes next to it.
  std::string logFile;
  std::string pidFile;
  // Where the rank's blackbox region lives (empty: NCCL_RESILIENT_BLACKBOX_DIR).
  std::string blackboxDir;

  // Throws std::invalid_argument naming the option and the rule it breaks:
  // the reference's ordering (soft < hard < barrier; interval < barrier,
  // heartbeat and soft timeouts; heartbeat interval < heartbeat timeout <
  // barrier timeout), positive durations, rank in [0, world size).
  void validate() const;

  // The command-line arguments (without argv[0]) that parse back to this.
  std::vector<std::string> arguments() const;
};

// `path` with every "{rank}" replaced by `rank`.
std::string expandRankPlaceholder(const std::string& path, int rank);

}  // namespace resilient::restart::monitor
