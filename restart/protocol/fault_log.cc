#include "restart/protocol/fault_log.h"

#include <unistd.h>

#include <array>
#include <string>

#include "common/clock.h"

namespace resilient::restart::protocol {

int64_t FaultLog::append(FaultRecord record) {
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
  const int64_t index = store_.add(keys_.faultCount(), 1, timeout_);
  store_.set(keys_.fault(index), record.toJson(), timeout_);
  return index;
}

int64_t FaultLog::publish(FaultRecord record) {
  const int iteration = record.iteration;
  const FaultReason reason = record.reason;
  const int64_t index = append(std::move(record));
  raise(iteration, reason);
  return index;
}

void FaultLog::raise(int iteration, FaultReason reason) {
  // The first fault of the iteration names the reason; later ones keep it.
  store_.compareSet(keys_.interrupted(iteration), std::nullopt, faultReasonName(reason), timeout_);
}

std::vector<FaultRecord> FaultLog::recordsOf(int iteration) {
  const std::optional<std::string> countText = store_.get(keys_.faultCount(), timeout_);
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
  for (const auto& value : store_.multiGet(names, timeout_)) {
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

}  // namespace resilient::restart::protocol
