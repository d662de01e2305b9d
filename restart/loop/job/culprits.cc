#include "restart/loop/job/culprits.h"

#include <string>

namespace resilient::restart {

using protocol::FaultReason;
using protocol::FaultRecord;

std::set<int> namedRanks(const std::vector<FaultRecord>& records) {
  std::set<int> named;
  for (const FaultRecord& r : records) {
    if (r.culprit >= 0 && r.reason != FaultReason::kRestartAbort) {
      named.insert(r.culprit);
    }
  }
  return named;
}

std::set<int> culpritsOf(const std::vector<FaultRecord>& records, const AbortTimes& abortBegun,
                         bool absentIsNever) {
  std::set<int> culprits;
  for (const FaultRecord& r : records) {
    if (r.culprit < 0 || r.reason == FaultReason::kRestartAbort) {
      continue;
    }
    const auto begun = abortBegun.find(r.culprit);
    if (begun == abortBegun.end() ? absentIsNever : r.detectedOrRecordedNs() < begun->second) {
      culprits.insert(r.culprit);
    }
  }
  return culprits;
}

AbortTimes readAbortTimes(store::Store& store, const protocol::JobKeys& keys, int iteration,
                          const std::set<int>& ranks, store::Timeout timeout) {
  AbortTimes times;
  if (ranks.empty()) {
    return times;
  }
  std::vector<std::string> names;
  names.reserve(ranks.size());
  for (const int r : ranks) {
    names.push_back(keys.abortBegun(iteration, r));
  }
  const std::vector<std::optional<std::string>> values = store.multiGet(names, timeout);
  auto value = values.begin();
  for (const int r : ranks) {
    if (*value) {
      times[r] = std::stoull(**value);
    }
    ++value;
  }
  return times;
}

}  // namespace resilient::restart
