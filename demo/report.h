// The per-rank report the orchestrator reads after the job: how the rank
// ended, the loop's timeline (Wrapper::timeline()) and the trainer's events,
// as one JSON object in <run-dir>/rank-<initial rank>.json.
#pragma once

#include <string>
#include <vector>

#include "resilient/restart.hpp"
#include "trainer.h"

namespace resilient::demo {

// What the process holds: open descriptors and threads (/proc/self).
struct ProcessResources {
  int descriptors = 0;
  int threads = 0;
  static ProcessResources now();
};

struct RankReport {
  int rank = 0;            // initial rank
  std::string outcome;     // "completed", "discarded", "aborted", "error"
  std::string message;     // the exception's text when not completed
  std::string finalState;  // State::describe() of the last iteration
  std::vector<restart::TimelineEvent> timeline;
  std::vector<TrainerEvent> events;
  // Before the Wrapper was made, and after it and everything it made went:
  // the reliability matrix checks that nothing leaked.
  ProcessResources before;
  ProcessResources after;
};

// Writes `report` to `path` (temporary file and rename).
void writeReport(const std::string& path, const RankReport& report);

}  // namespace resilient::demo
