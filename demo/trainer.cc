#include "trainer.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "chaos.h"
#include "checkpoint.h"
#include "demo_config.h"
#include "gpu_allreduce.h"
#include "model.h"

namespace resilient::demo {

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// The payload all-reduce (--payload-kb): every element of every active rank
// holds activeRank + 1 + step % 7, so the sum is known and a wrong element is
// an error (a fault of this iteration, like any other exception).
void allReducePayload(const std::function<void(std::vector<float>&)>& allReduce,
                      std::vector<float>& payload, const restart::State& s, int step) {
  const auto n = static_cast<float>(s.activeWorldSize);
  const auto bump = static_cast<float>(step % 7);
  std::fill(payload.begin(), payload.end(), static_cast<float>(s.activeRank + 1) + bump);
  allReduce(payload);
  const float want = n * (n + 1) / 2 + n * bump;
  for (size_t i = 0; i < payload.size(); ++i) {
    if (payload[i] != want) {
      throw std::runtime_error("payload all-reduce of step " + std::to_string(step) +
                               ": element " + std::to_string(i) + " is " +
                               std::to_string(payload[i]) + ", not " + std::to_string(want));
    }
  }
}

}  // namespace

Trainer::Trainer(DemoConfig config, const CudaRuntime* cuda)
    : config_(std::move(config)), cuda_(cuda) {
  if (config_.nccl && cuda_ == nullptr) {
    throw std::logic_error("--nccl needs the CUDA runtime");
  }
}

Trainer::~Trainer() = default;

void Trainer::record(int iteration, const char* event, int step) {
  events_.push_back({iteration, event, step, monotonicNs()});
}

std::vector<float> Trainer::operator()(restart::CallContext& ctx) {
  const restart::State& s = ctx.state();
  // Options has one factory, hostCommunicatorFactory (or with --nccl
  // ncclCommunicatorFactory): its communicators are HostCommunicators (or
  // NcclCommunicators). (static_cast: libresilient-restart.so does not export
  // the classes' type information, so a dynamic_cast does not link.)
  restart::Communicator* made = ctx.communicator("dp");
  const char* const kind = config_.nccl ? "nccl comm" : "host comm";
  if (made == nullptr || made->describe().rfind(kind, 0) != 0) {
    throw std::logic_error(std::string("communicator \"dp\" is not a ") +
                           (config_.nccl ? "NCCL" : "host") + " communicator");
  }
  std::function<void(std::vector<float>&)> allReduce;
  if (config_.nccl) {
    auto* comm = static_cast<restart::NcclCommunicator*>(made);
    if (gpu_ == nullptr) {
      gpu_ = std::make_unique<GpuAllReduce>(cuda_, static_cast<size_t>(kWeights) + 1);
    }
    allReduce = [this, &ctx, comm](std::vector<float>& v) { (*gpu_)(ctx, *comm, v); };
  } else {
    auto* comm = static_cast<restart::HostCommunicator*>(made);
    allReduce = [comm](std::vector<float>& v) { comm->allReduce(v.data(), v.data(), v.size()); };
  }
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
  gEnteredIteration = s.iteration;
  std::printf("enter iteration=%d rank=%d active=%d/%d checkpoint_step=%d mono_ns=%llu\n",
              s.iteration, s.initialRank, s.activeRank, s.activeWorldSize, c.step,
              static_cast<unsigned long long>(monotonicNs()));
  std::fflush(stdout);

  const Shard shard = makeShard(s.activeRank);
  const size_t totalSamples = static_cast<size_t>(kSamplesPerShard) * config_.shards;
  std::vector<float> sums;
  std::vector<float> payload(static_cast<size_t>(config_.payloadKb) * 1024 / sizeof(float));
  std::vector<float>& w = c.weights;
  for (int step = c.step; step < config_.steps; ++step) {
    ctx.checkCancelled();
    // The simulated compute time of a step (a real job runs its model here).
    std::this_thread::sleep_for(
        std::chrono::milliseconds(config_.stepMs + chaosStepDelayMs(step + 1, s.iteration)));
    if (chaosPoisoned()) {
      // What a kernel of a poisoned context reports (cudaErrorIllegalAddress
      // is sticky: every later call of the process fails the same way).
      throw std::runtime_error(
          "CUDA error: an illegal memory access was encountered (simulated: SIGUSR1)");
    }
    shardSums(shard, w, sums);
    allReduce(sums);
    if (!payload.empty()) {
      allReducePayload(allReduce, payload, s, step);
    }
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
    if (done == kSteadyStep && s.iteration == 0) {
      chaosAt(ChaosPhase::kSteady, s.iteration);
    }
  }
  record(s.iteration, "returned", config_.steps);
  chaosAt(ChaosPhase::kCompletion, s.iteration);  // the completion barrier comes next
  return w;
}

}  // namespace resilient::demo
