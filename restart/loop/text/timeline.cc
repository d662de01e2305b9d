#include "restart/loop/text/timeline.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "common/clock.h"

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

std::string timelineJson(const std::vector<TimelineEvent>& events) {
  nlohmann::json array = nlohmann::json::array();
  for (const TimelineEvent& e : events) {
    array.push_back({{"iteration", e.iteration},
                     {"phase", e.phase},
                     {"mono_ns", e.monoNs},
                     {"wall_ns", e.wallNs},
                     {"detail", e.detail}});
  }
  // Replace, not throw, on invalid UTF-8 in a detail (a host name, an
  // exception's text): a timeline is written after a failure too.
  return array.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace resilient::restart
