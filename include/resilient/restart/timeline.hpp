// What the loop did and when, for the demo's timeline and the restart
// benchmark: one event per phase of every iteration on this rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

struct TimelineEvent {
  int iteration = 0;
  // "started", "initial barrier", "assigned", "communicators ready",
  // "function entered", "function returned", "fault detected", "abort begun",
  // "abort done", "finalized", "health checked", "iteration barrier",
  // "culprits", "reassigned", "completed", "terminated".
  std::string phase;
  uint64_t monoNs = 0;  // CLOCK_MONOTONIC (comparable between processes of one host)
  uint64_t wallNs = 0;  // CLOCK_REALTIME
  std::string detail;
};

// The events as one JSON array, the format every reader of a timeline uses
// (the demo, the restart benchmark, the tests):
//   [{"iteration": 0, "phase": "started", "mono_ns": 1, "wall_ns": 2, "detail": "..."}, ...]
std::string timelineJson(const std::vector<TimelineEvent>& events);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
