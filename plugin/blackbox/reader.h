// The reading side of the blackbox: opens a process's region (live, or left
// behind by a crash), checks it, and takes a consistent snapshot. Consumers
// may also set bits of the control word (fail fast).
#pragma once

#include <string>
#include <vector>

#include "plugin/common/status.h"
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

Result<Snapshot> readRegion(const std::string& path);

// ORs `bits` into the region's control word.
Status setControlBits(const std::string& path, uint32_t bits);

}  // namespace resilient::blackbox
