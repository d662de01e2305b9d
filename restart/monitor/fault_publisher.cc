#include "restart/monitor/fault_publisher.h"

#include <time.h>
#include <unistd.h>

#include "restart/protocol/terminated_ranks.h"
#include "restart/store/errors.h"

namespace resilient::restart::monitor {

namespace {

uint64_t wallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string hostName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) {
    return "?";
  }
  return host;
}

}  // namespace

FaultPublisher::FaultPublisher(store::Store& store, const protocol::JobKeys& keys, int reporter,
                               int worldSize, store::Timeout callTimeout)
    : store_(store),
      keys_(keys),
      reporter_(reporter),
      worldSize_(worldSize),
      timeout_(callTimeout),
      host_(hostName()),
      pid_(::getpid()) {}

int64_t FaultPublisher::publish(protocol::FaultRecord record) {
  record.reporter = reporter_;
  record.wallNs = wallNs();
  record.host = host_;
  record.pid = pid_;
  const int64_t index = store_.add(keys_.faultCount(), 1, timeout_);
  store_.set(keys_.fault(index), record.toJson(), timeout_);
  return index;
}

bool FaultPublisher::markTerminated(int rank, protocol::FaultReason reason) {
  return protocol::markTerminated(store_, keys_, rank, protocol::faultReasonName(reason), timeout_);
}

bool FaultPublisher::isTerminated(int rank) {
  return store_.get(keys_.terminated(rank), timeout_).has_value();
}

void FaultPublisher::markInterrupted(int iteration, protocol::FaultReason reason) {
  store_.compareSet(keys_.interrupted(iteration), std::nullopt, protocol::faultReasonName(reason),
                    timeout_);
}

void FaultPublisher::countAtIterationBarrier(int rank, int iteration) {
  store::BarrierArrival a;
  a.name = keys_.iterationBarrier();
  a.generation = static_cast<uint64_t>(iteration);
  a.rank = rank;
  a.worldSize = worldSize_;
  a.waitForRelease = false;
  try {
    store_.barrier(a, timeout_);
  } catch (const store::BarrierStale&) {
    // The generation completed without this arrival being needed any more.
  }
}

}  // namespace resilient::restart::monitor
