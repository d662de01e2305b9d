// The reading side of the blackbox: opens a process's region (live, or left
// behind by a crash), checks it, and takes a consistent snapshot. Consumers
// may also set bits of the control word (fail fast).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "resilient/blackbox.h"

namespace resilient::blackbox {

// A communicator slot of the profiler and its flight recorder.
struct CommView {
  resilient_blackbox_comm comm{};
  std::vector<resilient_blackbox_op> flight;  // this communicator's entries, oldest first
};

struct Snapshot {
  std::string path;
  resilient_blackbox_header header{};
  std::vector<resilient_blackbox_connection> connections;  // slots in use
  std::vector<resilient_blackbox_fault> faults;            // oldest first
  std::vector<CommView> comms;                             // active, then finalized; by slot
  bool processAlive = false;                               // the writing process still exists
};

// A pid (numeric) names "<dir>/resilient-blackbox-<pid>"; anything else is a path.
std::string resolveRegion(const std::string& pidOrPath, const std::string& dir);

struct ReadOptions {
  bool flight = true;  // false: the communicator table without the flight-recorder rings
  bool connections = true;  // false: no connection table (Snapshot::connections empty)
  bool faults = true;       // false: no fault ring (Snapshot::faults empty)
};

Result<Snapshot> readRegion(const std::string& path, const ReadOptions& options = {});

// A region kept mapped, for a consumer that polls it (the restart library's
// monitor thread): the fault counter is one atomic load, snapshots need no
// open/map per call, and the control word can be set and cleared.
class RegionWatch {
 public:
  static Result<RegionWatch> open(const std::string& path);
  RegionWatch(RegionWatch&&) noexcept;
  RegionWatch& operator=(RegionWatch&&) noexcept;
  ~RegionWatch();

  // Faults recorded so far (header.faultCount).
  uint64_t faultCount() const noexcept;
  // The faults numbered after `seen` (the ring keeps the last faultSlots),
  // in order, reading only their slots: what a consumer that polls the
  // counter needs, without a whole snapshot (every connection and
  // communicator slot, hundreds of KB) each time the counter moves. A fault
  // whose slot is still being written is not among them.
  std::vector<resilient_blackbox_fault> faultsAfter(uint64_t seen) const;
  Snapshot read(const ReadOptions& options = {}) const;
  // The consumers' abort: a new abort epoch, then the fail-fast bit; its end
  // clears the fail-fast bit (RESILIENT_BLACKBOX_CONTROL_*).
  void beginAbort() const noexcept;
  void endAbort() const noexcept;
  // Appends a report (RESILIENT_BLACKBOX_IS_REPORT) to the fault ring: the
  // one other thing a consumer writes.
  void recordReport(const resilient_blackbox_fault& report) const noexcept;
  const std::string& path() const noexcept;

 private:
  RegionWatch();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The same on the region at `path` (resilient-inspect --fail-fast, tests).
Status beginAbort(const std::string& path);
Status endAbort(const std::string& path);
// Appends a report to the region at `path` (RegionWatch::recordReport).
Status recordReport(const std::string& path, const resilient_blackbox_fault& report);

}  // namespace resilient::blackbox
