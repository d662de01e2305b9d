#include "restart/loop/timeline.h"

#include <utility>

#include "plugin/common/clock.h"

namespace resilient::restart {

void Timeline::record(int iteration, std::string phase, std::string detail) {
  recordAt(monotonicNs(), iteration, std::move(phase), std::move(detail));
}

void Timeline::recordAt(uint64_t monoNs, int iteration, std::string phase, std::string detail) {
  const uint64_t nowMono = monotonicNs();
  const uint64_t wall = wallClockNs() - (nowMono - monoNs);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(TimelineEvent{iteration, std::move(phase), monoNs, wall, std::move(detail)});
}

std::vector<TimelineEvent> Timeline::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

}  // namespace resilient::restart
