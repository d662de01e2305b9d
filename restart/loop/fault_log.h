// The job's fault records in the store (restart/protocol/job_keys.h):
// publishing one raises its iteration's interruption key, so that every
// rank's monitor thread wakes; reading them back after the iteration barrier
// gives every rank the same list, hence the same culprits.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "restart/store/store.h"

namespace resilient::restart {

class FaultLog {
 public:
  FaultLog(store::Store& store, const protocol::JobKeys& keys) : store_(store), keys_(keys) {}

  // Appends `record` (its wallNs, host and pid are filled when zero) and sets
  // its iteration's interruption key. Returns the record's index.
  int64_t publish(protocol::FaultRecord record);
  // Every record of `iteration`, in publication order.
  std::vector<protocol::FaultRecord> recordsOf(int iteration);

 private:
  store::Store& store_;
  const protocol::JobKeys& keys_;
};

// The culprits of one iteration's records: those named by the records
// published within `window` of the first one (concurrent faults; later ones
// are mostly consequences of the abort, e.g. a peer seeing our connections
// close). Records of a RestartAbort name no culprit.
std::set<int> culpritsOf(const std::vector<protocol::FaultRecord>& records,
                         std::chrono::milliseconds window);

}  // namespace resilient::restart
