// The job's fault records in the store (restart/protocol/job_keys.h):
// publishing one raises its iteration's interruption key, so that every
// rank's monitor thread wakes; reading them back after the iteration barrier
// gives every rank the same list, hence the same culprits.
#pragma once

#include <cstdint>
#include <vector>

#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart::protocol {

class FaultLog {
 public:
  FaultLog(store::Store& store, const JobKeys& keys, store::Timeout timeout = {})
      : store_(store), keys_(keys), timeout_(timeout) {}

  // Appends `record` (its wallNs, host and pid are filled when zero) without
  // raising anything; returns the record's index.
  int64_t append(FaultRecord record);
  // append(), then sets the iteration's interruption key (the first reason
  // stays), which wakes every rank's monitor thread.
  int64_t publish(FaultRecord record);
  // Sets iteration `k`'s interruption key unless set (naming `reason`).
  void raise(int iteration, FaultReason reason);
  // Every record of `iteration`, in publication order.
  std::vector<FaultRecord> recordsOf(int iteration);

 private:
  store::Store& store_;
  const JobKeys& keys_;
  store::Timeout timeout_;
};

}  // namespace resilient::restart::protocol
