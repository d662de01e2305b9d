// The culprits of an iteration, computed from its fault records the same
// way on every rank.
#pragma once

#include <chrono>
#include <set>
#include <vector>

#include "restart/protocol/fault_record.h"

namespace resilient::restart {

// The culprits of one iteration's records: those named by the records
// published within `window` of the first one (concurrent faults; later ones
// are mostly consequences of the abort, e.g. a peer seeing our connections
// close). Records of a RestartAbort name no culprit.
std::set<int> culpritsOf(const std::vector<protocol::FaultRecord>& records,
                         std::chrono::milliseconds window);

}  // namespace resilient::restart
