#include "restart/loop/job/culprits.h"

#include <algorithm>

namespace resilient::restart {

using protocol::FaultRecord;

std::set<int> culpritsOf(const std::vector<FaultRecord>& records,
                         std::chrono::milliseconds window) {
  std::set<int> culprits;
  if (records.empty()) {
    return culprits;
  }
  const uint64_t first =
      std::min_element(records.begin(), records.end(), [](const auto& a, const auto& b) {
        return a.wallNs < b.wallNs;
      })->wallNs;
  const auto windowNs =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  for (const FaultRecord& r : records) {
    if (r.culprit >= 0 && r.wallNs <= first + windowNs &&
        r.reason != protocol::FaultReason::kRestartAbort) {
      culprits.insert(r.culprit);
    }
  }
  return culprits;
}

}  // namespace resilient::restart
