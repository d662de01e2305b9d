// What a monitor process writes to the job's store (protocol/job_keys.h):
// fault records (faults/count + faults/<i>), terminated/<r>,
// iteration/<k>/interrupted and arrivals at the iteration barrier on a
// rank's behalf. One record per terminated rank: whoever sets
// terminated/<r> first (compareSet) publishes the record about it, so a
// death seen by the rank's own monitor and by its sibling is reported once.
// Every call throws store::StoreError when the store fails.
#pragma once

#include <cstdint>

#include "restart/protocol/fault_log.h"
#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart::monitor {

struct FaultPublisherOptions {
  int reporter = 0;  // the initial rank whose monitor publishes
  store::Timeout callTimeout{};
};

class FaultPublisher {
 public:
  FaultPublisher(store::Store& store, const protocol::JobKeys& keys,
                 const FaultPublisherOptions& options);

  // Fills reporter, wall time, host and pid, then appends the record; returns
  // its index (faults/<index>).
  int64_t publish(protocol::FaultRecord record);
  // Sets terminated/<rank> to the reason's name unless it is set; true when
  // this call set it.
  bool markTerminated(int rank, protocol::FaultReason reason);
  bool isTerminated(int rank);
  // Sets iteration/<k>/interrupted unless an earlier fault of k set it.
  void markInterrupted(int iteration, protocol::FaultReason reason);
  // Counts `rank` at the iteration barrier of generation `iteration`, a
  // barrier of `slots` initial ranks, and returns at once. A generation
  // already complete and forgotten is no error.
  void countAtIterationBarrier(int rank, int iteration, int slots);
  // The same at the completion barrier (a rank that died once its function
  // had returned: its part of the iteration is done).
  void countAtCompletionBarrier(int rank, int iteration, int slots);

 private:
  void countAt(const std::string& barrier, int rank, int iteration, int slots);

  store::Store& store_;
  const protocol::JobKeys& keys_;
  int reporter_;
  store::Timeout timeout_;
  protocol::FaultLog log_;
};

}  // namespace resilient::restart::monitor
