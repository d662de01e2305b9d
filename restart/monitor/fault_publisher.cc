#include "restart/monitor/fault_publisher.h"

#include "restart/protocol/terminated_ranks.h"
#include "store/errors.h"

namespace resilient::restart::monitor {

FaultPublisher::FaultPublisher(store::Store& store, const protocol::JobKeys& keys,
                               const FaultPublisherOptions& options)
    : store_(store),
      keys_(keys),
      reporter_(options.reporter),
      timeout_(options.callTimeout),
      log_(store, keys, options.callTimeout) {}

int64_t FaultPublisher::publish(protocol::FaultRecord record) {
  record.reporter = reporter_;
  record.wallNs = 0;  // now
  return log_.append(std::move(record));
}

bool FaultPublisher::markTerminated(int rank, protocol::FaultReason reason) {
  return protocol::markTerminated(store_, keys_, rank, protocol::faultReasonName(reason), timeout_);
}

bool FaultPublisher::isTerminated(int rank) {
  return store_.get(keys_.terminated(rank), timeout_).has_value();
}

void FaultPublisher::markInterrupted(int iteration, protocol::FaultReason reason) {
  log_.raise(iteration, reason);
}

void FaultPublisher::countAtIterationBarrier(int rank, int iteration, int slots) {
  countAt(keys_.iterationBarrier(), rank, iteration, slots);
}

void FaultPublisher::countAtCompletionBarrier(int rank, int iteration, int slots) {
  countAt(keys_.completionBarrier(), rank, iteration, slots);
}

void FaultPublisher::countAt(const std::string& barrier, int rank, int iteration, int slots) {
  store::BarrierArrival a;
  a.name = barrier;
  a.generation = static_cast<uint64_t>(iteration);
  a.rank = rank;
  a.worldSize = slots;
  a.waitForRelease = false;
  try {
    store_.barrier(a, timeout_);
  } catch (const store::BarrierStale&) {
    // The generation completed without this arrival being needed any more.
  }
}

}  // namespace resilient::restart::monitor
