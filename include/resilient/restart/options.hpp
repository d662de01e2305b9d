// Everything the restart loop can be told (docs/reference/restart-model.md §1.2, Wrapper's
// parameters). Options::fromEnvironment() starts from the NCCL_RESILIENT_RESTART_*
// knobs (environment or nccl.conf; docs/configuration.md); a program then
// overrides fields in code. validate() enforces the reference's ordering rules
// and throws ConfigError naming the option and the rule it breaks.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/hooks.hpp"
#include "resilient/restart/rank_assignment.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

using Millis = std::chrono::milliseconds;

struct Options {
  // The job's store: "tcp://host:port", "etcd://a:2379,b:2379" or "memory"
  // (one process). Empty: NCCL_RESILIENT_STORE_URL.
  std::string storeUrl;
  // Host the embedded TCP store in this process when storeUrl is tcp:// and
  // this rank's initial rank is 0 (the reference's default; a launcher or a
  // standalone `resilient-store` avoids the single point of failure).
  bool hostStore = false;
  // Ranks of the job and this process's initial rank. -1: from RANK and
  // WORLD_SIZE.
  int rank = -1;
  int worldSize = -1;
  // A name for the job's keys in the store (several jobs may share a store).
  std::string jobId = "default";

  InitializeFn initialize;  // e.g. retryController(...)
  InterruptFn interrupt;    // before any abort: stops the wrapped function (see hooks.hpp)
  AbortFn abort;            // user aborts, run after the communicators' (see restart.md)
  FinalizeFn finalize;
  HealthCheckFn healthCheck;  // at the start of every iteration
  CompletionFn completion;
  TerminateFn terminate;
  RankAssignmentPtr rankAssignment = defaultRankAssignment();
  // The communicators made for every iteration, by name (see communicator.hpp).
  std::vector<std::pair<std::string, CommunicatorFactory>> communicators;

  Millis monitorThreadInterval{1000};
  Millis monitorProcessInterval{1000};
  Millis heartbeatInterval{1000};
  Millis progressWatchdogInterval{1000};
  Millis softTimeout{60000};
  Millis hardTimeout{90000};
  Millis heartbeatTimeout{30000};
  Millis barrierTimeout{120000};
  Millis completionTimeout{120000};
  Millis terminationGraceTime{5000};
  // Bounds on the loop's own phases (the reference leaves them to the hooks).
  Millis finalizeTimeout{30000};
  Millis healthCheckTimeout{60000};  // the whole chain (the CUDA check alone may take 30 s)
  Millis communicatorTimeout{60000};
  // Restart storms: at most `stormLimit` restarts within `stormWindow` (0: no
  // limit); the next one ends the job on every rank with one RestartAbort
  // naming the recurring fault and how often it recurred. From the second
  // restart within the window on, the loop waits before re-entering the
  // function: `restartBackoff`, doubling each time, at most `restartBackoffMax`.
  int stormLimit = 10;
  Millis stormWindow{600000};
  Millis restartBackoff{100};
  Millis restartBackoffMax{10000};
  // The job's health comparison (docs/observability.md): every
  // `healthInterval` each active rank ships its links' busy time and its
  // collectives' arrival times to the store, and active rank 0 looks for
  // slow links (below `slowLinkPercent` % of the job's other links while busy,
  // over `slowLinkWindow`), stragglers (last to most collectives by
  // `stragglerLag` or more, over `stragglerWindow`) and stuck ranks (alive,
  // not entering a collective the others have waited in for
  // `stuckRankTimeout`). A finding is reported: a
  // WARN, a store record, a record in the blackbox of the process it names,
  // the timeline. With its `...Restart` flag it is also a fault naming that
  // rank (reason health-report): the job restarts and terminateCulprits
  // replaces the rank by a spare. healthInterval 0: no comparison.
  Millis healthInterval{1000};
  int slowLinkPercent = 40;
  Millis slowLinkWindow{4000};
  bool slowLinkRestart = false;
  Millis stragglerLag{20};
  Millis stragglerWindow{10000};
  bool stragglerRestart = false;
  Millis stuckRankTimeout{8000};
  bool stuckRankRestart = false;

  // The monitor process: its executable (empty: `resilient-monitor` next to
  // the library, then on PATH), its log and pid files ({rank} is replaced by
  // the initial rank; must be absolute). useMonitorProcess=false runs without
  // one (no hard timeout, no death records: tests and single-process runs).
  bool useMonitorProcess = true;
  std::string monitorExecutable;
  std::string monitorLogFile;
  std::string monitorPidFile;
  // The blackbox directory the plugins write to (empty:
  // NCCL_RESILIENT_BLACKBOX_DIR); the monitor thread watches this process's
  // region, the monitor process dumps it after a death.
  std::string blackboxDir;
  // At every restart, run the stock checks before healthCheck: CUDA and the
  // GPU's recovery action when a GPU is usable, the NICs (health.hpp).
  bool automaticHealthChecks = true;
  // A culprit named by the plugins' signals is treated as unhealthy and
  // replaced by a spare (beyond the reference).
  bool terminateCulprits = true;
  // false: run the function once, with no restart machinery.
  bool enabled = true;

  // Defaults with the NCCL_RESILIENT_RESTART_* knobs applied.
  static Options fromEnvironment();
  // Throws ConfigError when an option is out of range or the ordering rules
  // (soft < hard < barrier, ...) are broken.
  void validate() const;
};

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
