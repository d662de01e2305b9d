// This process's blackbox region as the restart loop uses it: new plugin
// faults for the monitor thread, a progress digest for the progress
// watchdog, and the fail-fast switch of the abort. The region appears when a
// plugin is loaded (NCCL init, the host engine), so the watch attaches
// lazily; without a region every call is a cheap no-op.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "blackbox/reader.h"

namespace resilient::restart {

class BlackboxWatch {
 public:
  // `dir`: the plugins' NCCL_RESILIENT_BLACKBOX_DIR; empty: no blackbox.
  explicit BlackboxWatch(const std::string& dir);

  // Faults recorded since the previous call or skipSeen(), except those the
  // fail-fast switch itself causes (class "aborted") and reports (slow link,
  // straggler: RESILIENT_BLACKBOX_IS_REPORT).
  std::vector<resilient_blackbox_fault> newFaults();
  // Forgets the faults recorded so far (a new iteration starts clean).
  void skipSeen();
  // A number that grows whenever NCCL operations complete (profiler) or
  // requests complete on a connection (net plugin).
  uint64_t progressDigest();
  // The profiler's communicator table (active and finalized slots).
  std::vector<blackbox::CommView> comms();
  // The whole region with its flight recorder (nullopt: no region yet).
  std::optional<blackbox::Snapshot> snapshot();
  // Appends a report (slow link, straggler) to the fault ring.
  void recordReport(const resilient_blackbox_fault& report);
  // The plugins' process-wide fail-fast switch.
  void setFailFast(bool on);
  bool attached();

 private:
  bool attach();  // with mutex_ held

  std::mutex mutex_;
  std::string path_;
  std::optional<blackbox::RegionWatch> watch_;
  uint64_t seen_ = 0;
  bool skipOnAttach_ = true;
};

}  // namespace resilient::restart
