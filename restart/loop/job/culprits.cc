#include "restart/loop/job/culprits.h"

#include <cstdint>
#include <optional>
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

namespace {

// `absentBefore`: a rank without an abort time is named by a fault detected
// before it (UINT64_MAX: by any).
std::set<int> culprits(const std::vector<FaultRecord>& records, const AbortTimes& abortBegun,
                       uint64_t absentBefore) {
  std::set<int> out;
  for (const FaultRecord& r : records) {
    if (r.culprit < 0 || r.reason == FaultReason::kRestartAbort) {
      continue;
    }
    const auto begun = abortBegun.find(r.culprit);
    const uint64_t before = begun == abortBegun.end() ? absentBefore : begun->second;
    if (r.detectedOrRecordedNs() < before) {
      out.insert(r.culprit);
    }
  }
  return out;
}

}  // namespace

std::set<int> culpritsOf(const std::vector<FaultRecord>& records, const AbortTimes& abortBegun) {
  return culprits(records, abortBegun, UINT64_MAX);
}

std::set<int> culpritsOf(const std::vector<FaultRecord>& records, const AbortTimes& abortBegun,
                         uint64_t firstAbortNs) {
  return culprits(records, abortBegun, firstAbortNs);
}

void lowerFirstAbort(store::Store& store, const protocol::JobKeys& keys, int iteration,
                     uint64_t abortNs, store::Timeout timeout) {
  const std::string key = keys.firstAbort(iteration);
  const std::string mine = std::to_string(abortNs);
  std::optional<std::string> current = store.get(key, timeout);
  // Again only when another rank changed it meanwhile.
  while (!current || std::stoull(*current) > abortNs) {
    const store::CasResult r = store.compareSet(key, current, mine, timeout);
    if (r.swapped) {
      return;
    }
    current = r.current;
  }
}

uint64_t readFirstAbort(store::Store& store, const protocol::JobKeys& keys, int iteration,
                        store::Timeout timeout) {
  const std::optional<std::string> v = store.get(keys.firstAbort(iteration), timeout);
  return v ? std::stoull(*v) : 0;
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
