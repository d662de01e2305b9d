// What the loop did and when, for the demo's timeline and the restart
// benchmark: one event per phase of every iteration on this rank.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace resilient::restart
