// A fault record: what the loop, the monitor thread and the monitor process
// publish in the store when something interrupts an iteration (the
// reference's interruption records, docs/reference/restart-model.md §1.1, plus the
// plugins' signals and the suspected culprit).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace resilient::restart::protocol {

enum class FaultReason {
  kException,       // the wrapped function (or a hook) threw
  kRestartAbort,    // RestartAbort: the job stops restarting (terminal)
  kSoftTimeout,     // no progress for the soft timeout: cooperative restart
  kHardTimeout,     // no progress for the hard timeout: the rank is killed
  kTerminated,      // the rank's process died
  kUnresponsive,    // heartbeats stopped (rank and monitor gone: node lost)
  kMonitorProcess,  // the monitor process failed
  kNetFault,        // the net plugin reported a fault (blackbox)
  kCollectiveHung,  // the profiler reported a hung collective or a silent progress thread
  kHealthCheck,     // a health check failed
  kCommunicator,    // a communicator failed (creation, async error)
  kBarrierTimeout,  // ranks never arrived at a barrier
  kHealthReport,    // a slow link or a straggler, with its action "restart"
};

const char* faultReasonName(FaultReason reason) noexcept;
std::optional<FaultReason> parseFaultReason(std::string_view name) noexcept;

struct FaultRecord {
  int iteration = 0;
  FaultReason reason = FaultReason::kException;
  int reporter = -1;  // initial rank whose process published it (-1: outside the job)
  int subject = -1;   // initial rank it is about (a monitor reports its own rank, a
                      // sibling reports the rank it watches); -1: none
  int culprit = -1;   // initial rank suspected of causing it; -1: unknown
  std::string detail;
  uint64_t wallNs = 0;  // CLOCK_REALTIME when recorded
  // CLOCK_REALTIME when the reporter detected the fault (the plugin's own
  // timestamp of it, the moment a monitor saw its rank end); 0: when recorded.
  // The culprits compare it with the named rank's abort (culprits.h): a
  // record may be published long after the detection (a loaded host).
  uint64_t detectedNs = 0;
  std::string host;     // the reporter's host
  int64_t pid = 0;      // the reporter's pid

  // detectedNs, or wallNs where the reporter did not know it.
  uint64_t detectedOrRecordedNs() const noexcept { return detectedNs != 0 ? detectedNs : wallNs; }

  std::string toJson() const;
  // Throws std::invalid_argument naming what is wrong.
  static FaultRecord fromJson(std::string_view json);
  // "iteration 2: net fault reported by rank 3 (culprit rank 5): …"
  std::string describe() const;
};

}  // namespace resilient::restart::protocol
