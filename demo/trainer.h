// The wrapped function of the demo: a data-parallel training loop over the
// communicator "dp". Every call (first or after a restart) loads the latest
// checkpoint, trains shard State::activeRank with gradients summed by an
// all-reduce (HostCommunicator::allReduce, or with --nccl ncclAllReduce on
// the GPU through GpuAllReduce), pings every step and checkpoints inside
// ctx.atomic().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_device.h"
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

class GpuAllReduce;

class Trainer {
 public:
  // `cuda`: the CUDA runtime, required with config.nccl.
  explicit Trainer(DemoConfig config, const CudaRuntime* cuda = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains to config.steps; returns the final weights.
  std::vector<float> operator()(restart::CallContext& ctx);

  const std::vector<TrainerEvent>& events() const { return events_; }

 private:
  void record(int iteration, const char* event, int step);

  DemoConfig config_;
  const CudaRuntime* cuda_;
  // --nccl: made by the first call and kept across iterations (its buffers
  // may still be in use by an interrupted all-reduce's kernel).
  std::unique_ptr<GpuAllReduce> gpu_;
  std::vector<TrainerEvent> events_;
};

uint64_t monotonicNs();

}  // namespace resilient::demo
