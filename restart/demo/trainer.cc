#include "trainer.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "checkpoint.h"
#include "model.h"

namespace resilient::demo {

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

void Trainer::record(int iteration, const char* event, int step) {
  events_.push_back({iteration, event, step, monotonicNs()});
}

std::vector<float> Trainer::operator()(restart::CallContext& ctx) {
  const restart::State& s = ctx.state();
  // Options has one factory, hostCommunicatorFactory: its communicators are
  // HostCommunicators. (static_cast: libresilient-restart.so does not export
  // the classes' type information, so a dynamic_cast does not link.)
  restart::Communicator* made = ctx.communicator("dp");
  if (made == nullptr || made->describe().rfind("host comm", 0) != 0) {
    throw std::logic_error("communicator \"dp\" is not a host communicator");
  }
  auto* comm = static_cast<restart::HostCommunicator*>(made);
  if (s.activeWorldSize != config_.shards) {
    // The data set is split into `shards` parts; the retry controller ends
    // the job before this can happen.
    throw restart::RestartAbort("the demo needs " + std::to_string(config_.shards) +
                                " active ranks, not " + std::to_string(s.activeWorldSize));
  }
  const std::string checkpointPath = config_.runDir + "/checkpoint.bin";
  Checkpoint c;
  if (std::optional<Checkpoint> loaded = loadCheckpoint(checkpointPath, kWeights)) {
    c = std::move(*loaded);
  } else {
    c.weights.assign(kWeights, 0.0F);
  }
  record(s.iteration, "entered", c.step);
  std::printf("enter iteration=%d rank=%d active=%d/%d checkpoint_step=%d mono_ns=%llu\n",
              s.iteration, s.initialRank, s.activeRank, s.activeWorldSize, c.step,
              static_cast<unsigned long long>(monotonicNs()));
  std::fflush(stdout);

  const Shard shard = makeShard(s.activeRank);
  const size_t totalSamples = static_cast<size_t>(kSamplesPerShard) * config_.shards;
  std::vector<float> sums;
  std::vector<float>& w = c.weights;
  for (int step = c.step; step < config_.steps; ++step) {
    ctx.checkCancelled();
    // The simulated compute time of a step (a real job runs its model here).
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.stepMs));
    shardSums(shard, w, sums);
    comm->allReduce(sums.data(), sums.data(), sums.size());
    const float loss = sgdStep(w, sums, totalSamples, config_.learningRate);
    ctx.ping();
    const int done = step + 1;
    if (step == c.step) {
      record(s.iteration, "first step", done);
    }
    std::printf("step iteration=%d rank=%d active=%d step=%d loss=%.9g mono_ns=%llu\n", s.iteration,
                s.initialRank, s.activeRank, done, static_cast<double>(loss),
                static_cast<unsigned long long>(monotonicNs()));
    std::fflush(stdout);
    if (done % config_.checkpointEvery == 0 && s.activeRank == 0) {
      ctx.atomic([&] { saveCheckpoint(checkpointPath, {done, w}); });
      std::printf("checkpoint iteration=%d step=%d\n", s.iteration, done);
      std::fflush(stdout);
    }
  }
  record(s.iteration, "returned", config_.steps);
  return w;
}

}  // namespace resilient::demo
