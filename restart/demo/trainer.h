// The wrapped function of the demo: a data-parallel training loop over the
// host communicator "dp". Every call (first or after a restart) loads the
// latest checkpoint, trains shard State::activeRank with gradients summed by
// allReduce, pings every step and checkpoints inside ctx.atomic().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "demo_config.h"
#include "resilient/restart.hpp"

namespace resilient::demo {

// Something the training loop did, for the orchestrator's timeline.
struct TrainerEvent {
  int iteration = 0;
  std::string event;  // "entered", "first step", "returned"
  int step = 0;       // steps done at that moment
  uint64_t monoNs = 0;
};

class Trainer {
 public:
  explicit Trainer(DemoConfig config) : config_(std::move(config)) {}

  // Trains to config.steps; returns the final weights.
  std::vector<float> operator()(restart::CallContext& ctx);

  const std::vector<TrainerEvent>& events() const { return events_; }

 private:
  void record(int iteration, const char* event, int step);

  DemoConfig config_;
  std::vector<TrainerEvent> events_;
};

uint64_t monotonicNs();

}  // namespace resilient::demo
