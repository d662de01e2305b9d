#include "restart/loop/fault_log.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <string>

#include "plugin/common/clock.h"

namespace resilient::restart {

using protocol::FaultRecord;

int64_t FaultLog::publish(FaultRecord record) {
  if (record.wallNs == 0) {
    record.wallNs = wallClockNs();
  }
  if (record.host.empty()) {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) == 0) {
      record.host = host.data();
    }
  }
  if (record.pid == 0) {
    record.pid = ::getpid();
  }
  const int64_t index = store_.add(keys_.faultCount(), 1);
  store_.set(keys_.fault(index), record.toJson());
  // The first fault of the iteration names the reason; later ones keep it.
  store_.compareSet(keys_.interrupted(record.iteration), std::nullopt,
                    protocol::faultReasonName(record.reason));
  return index;
}

std::vector<FaultRecord> FaultLog::recordsOf(int iteration) {
  const std::optional<std::string> countText = store_.get(keys_.faultCount());
  const int64_t count = countText ? std::stoll(*countText) : 0;
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int64_t i = 1; i <= count; ++i) {
    names.push_back(keys_.fault(i));
  }
  std::vector<FaultRecord> out;
  if (names.empty()) {
    return out;
  }
  for (const auto& value : store_.multiGet(names)) {
    // A record whose counter was taken but whose value is not written yet
    // belongs to a publisher still running: it is not part of the list.
    if (value) {
      FaultRecord r = FaultRecord::fromJson(*value);
      if (r.iteration == iteration) {
        out.push_back(std::move(r));
      }
    }
  }
  return out;
}

std::set<int> culpritsOf(const std::vector<FaultRecord>& records,
                         std::chrono::milliseconds window) {
  std::set<int> culprits;
  if (records.empty()) {
    return culprits;
  }
  const uint64_t first = std::min_element(records.begin(), records.end(), [](const auto& a,
                                                                             const auto& b) {
                           return a.wallNs < b.wallNs;
                         })->wallNs;
  const auto windowNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(window).count());
  for (const FaultRecord& r : records) {
    if (r.culprit >= 0 && r.wallNs <= first + windowNs &&
        r.reason != protocol::FaultReason::kRestartAbort) {
      culprits.insert(r.culprit);
    }
  }
  return culprits;
}

}  // namespace resilient::restart
