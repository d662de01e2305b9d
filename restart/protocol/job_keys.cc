#include "restart/protocol/job_keys.h"

#include <stdexcept>

namespace resilient::restart::protocol {

JobKeys::JobKeys(const std::string& jobId) : jobId_(jobId), prefix_("resilient/" + jobId + "/") {
  if (jobId.empty() || jobId.find('/') != std::string::npos) {
    throw std::invalid_argument("a job id must be non-empty and contain no '/': \"" + jobId + "\"");
  }
}

std::string JobKeys::identity(int initialRank) const {
  return prefix_ + "rank/" + std::to_string(initialRank) + "/identity";
}

std::string JobKeys::terminated(int initialRank) const {
  return prefix_ + "terminated/" + std::to_string(initialRank);
}

std::string JobKeys::terminatedCount() const {
  return prefix_ + "terminated/count";
}

std::string JobKeys::terminatedEntry(int64_t index) const {
  return prefix_ + "terminated/list/" + std::to_string(index);
}

std::string JobKeys::heartbeat(int initialRank) const {
  return prefix_ + "heartbeat/" + std::to_string(initialRank);
}

std::string JobKeys::faultCount() const {
  return prefix_ + "faults/count";
}

std::string JobKeys::fault(int64_t index) const {
  return prefix_ + "faults/" + std::to_string(index);
}

std::string JobKeys::interrupted(int iteration) const {
  return ofIteration(iteration, "interrupted");
}

std::string JobKeys::spare(int iteration, int initialRank) const {
  return ofIteration(iteration, "spare/" + std::to_string(initialRank));
}

std::string JobKeys::rendezvous(int iteration) const {
  return ofIteration(iteration, "comm/");
}

}  // namespace resilient::restart::protocol
