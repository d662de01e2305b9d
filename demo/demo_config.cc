#include "demo_config.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "chaos.h"

namespace resilient::demo {

using namespace std::chrono_literals;

namespace {

const char* const kUsage =
    "usage: resilient-demo-train --run-dir=DIR [--steps=N] [--checkpoint-every=N] "
    "[--step-ms=N] [--payload-kb=N] [--shards=N] [--plugin=PATH] [--monitor=PATH] [--nccl] "
    "[--cuda-library=PATH]\n"
    "       resilient-demo-train --check-cuda [--cuda-library=PATH]\n"
    "RANK and WORLD_SIZE come from the environment, the store from NCCL_RESILIENT_STORE_URL.\n"
    "--plugin is the host communicator's net plugin (the default mode). --nccl makes the\n"
    "communicator with NCCL instead and all-reduces on GPU 0; NCCL's settings come from the\n"
    "environment (scripts/demo.py --nccl sets NCCL_HOSTID per rank, NCCL_NET_PLUGIN, ...).\n"
    "--cuda-library: the CUDA runtime to dlopen (default libcudart.so.13, .so.12, then .so).\n"
    "--check-cuda: exit 0 if --nccl can run here (a CUDA runtime and a device), else 77.";

// The demo-sized value of a timeout, unless its knob is set in the
// environment (the reliability matrix shortens them).
void demoTimeout(std::chrono::milliseconds* field, std::chrono::milliseconds value,
                 const char* knob) {
  const char* set = std::getenv(knob);  // NOLINT(concurrency-mt-unsafe)
  if (set == nullptr || *set == '\0') {
    *field = value;
  }
}

int positive(std::string_view name, const std::string& text, int min) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < min) {
    throw std::invalid_argument(std::string(name) + "=" + text +
                                " is not an integer >= " + std::to_string(min) + "\n" + kUsage);
  }
  return value;
}

}  // namespace

// Tells a health check in the recovery of iteration k from the one at the
// start of an iteration.
int gEnteredIteration = -1;

DemoConfig parseCommandLine(int argc, char** argv) {
  DemoConfig c;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--run-dir") {
      c.runDir = value;
    } else if (name == "--steps") {
      c.steps = positive(name, value, 1);
    } else if (name == "--checkpoint-every") {
      c.checkpointEvery = positive(name, value, 1);
    } else if (name == "--step-ms") {
      c.stepMs = positive(name, value, 0);
    } else if (name == "--payload-kb") {
      c.payloadKb = positive(name, value, 0);
    } else if (name == "--shards") {
      c.shards = positive(name, value, 1);
    } else if (name == "--plugin") {
      c.plugin = value;
    } else if (name == "--monitor") {
      c.monitor = value;
    } else if (arg == "--nccl") {
      c.nccl = true;
    } else if (name == "--cuda-library" && !value.empty()) {
      c.cudaLibrary = value;
    } else if (arg == "--check-cuda") {
      c.checkCuda = true;
    } else {
      throw std::invalid_argument("unknown argument " + arg + "\n" + kUsage);
    }
  }
  if (c.checkCuda) {
    return c;
  }
  if (c.runDir.empty() || c.runDir.front() != '/') {
    throw std::invalid_argument(std::string("--run-dir must be an absolute path\n") + kUsage);
  }
  return c;
}

restart::Options demoOptions(const DemoConfig& config) {
  using namespace restart;
  Options o = Options::fromEnvironment();
  // o.jobId: NCCL_RESILIENT_RESTART_JOB (scripts/demo.py names each job: the
  // reference and the faulty run share one store, not their keys).
  // 6 active ranks, the others spares; after a loss the survivors close up
  // and the lowest-ranked spare becomes active rank 5.
  o.rankAssignment = compose({maxActiveWorldSize(config.shards), activateAllRanks(), shiftRanks()});
  // The data is split into exactly `shards` parts: fewer active ranks end the job.
  // The hooks are also where the reliability matrix injects its faults (chaos.h).
  o.initialize = [controller = retryController(std::nullopt, config.shards, config.shards)](
                     const State& s) {
    chaosInHook(ChaosHook::kInitialize,
                s.iteration == 0 ? ChaosPhase::kStartup : ChaosPhase::kRecoveryComms, s.iteration);
    controller(s);
  };
  o.healthCheck = [](const State& s) {
    const bool recovering = s.iteration == gEnteredIteration;
    const ChaosPhase phase = recovering        ? ChaosPhase::kRecoveryBarrier
                             : s.iteration == 0 ? ChaosPhase::kStartup
                                                : ChaosPhase::kRecoveryComms;
    chaosInHook(ChaosHook::kHealth, phase, s.iteration);
    if (chaosPoisoned()) {
      // What the CUDA health check says of a context with a sticky error.
      throw RankNeedsNewProcess(
          "CUDA health check: CUDA device 0 context is unusable: an illegal memory access was "
          "encountered (simulated: SIGUSR1)");
    }
    if (recovering) {
      chaosAt(ChaosPhase::kRecoveryBarrier, s.iteration);  // the iteration barrier comes next
    }
  };
  o.finalize = [](const State& s) {
    chaosInHook(ChaosHook::kFinalize, ChaosPhase::kRecoveryBarrier, s.iteration);
  };
  o.abort = [](const State& s) {
    chaosInHook(ChaosHook::kAbort, ChaosPhase::kRecoveryBarrier, s.iteration);
  };
  o.completion = [](const State& s) {
    chaosInHook(ChaosHook::kCompletion, ChaosPhase::kCompletion, s.iteration);
  };
  CommunicatorFactory factory;
  if (config.nccl) {
    // NCCL's defaults: revoke on abort (NCCL >= 2.28.7), shrink when an
    // iteration only removed ranks; ncclCommInitRankConfig with the unique id
    // exchanged through the store otherwise.
    factory = ncclCommunicatorFactory();
  } else {
    HostCommunicatorOptions host;
    host.plugin = config.plugin;
    host.operationTimeout = 30s;  // backstop only: the plugin's liveness timeout reports first
    factory = hostCommunicatorFactory(host);
  }
  o.communicators = {{"dp", [factory](const CommunicatorSetup& setup) {
                        if (setup.state.iteration == 1) {
                          chaosAt(ChaosPhase::kRecoveryComms, 1);
                        }
                        return factory(setup);
                      }}};

  o.useMonitorProcess = true;
  o.monitorExecutable = config.monitor;
  o.monitorLogFile = config.runDir + "/monitor-{rank}.log";
  o.monitorPidFile = config.runDir + "/monitor-{rank}.pid";

  // Demo-sized timeouts (the defaults are sized for real jobs): a frozen rank
  // is reported by its peers' net plugins at the liveness timeout (1.5 s) and
  // killed by its monitor at the hard timeout, which lets the survivors'
  // iteration barrier complete.
  o.monitorThreadInterval = 100ms;
  o.monitorProcessInterval = 100ms;
  o.progressWatchdogInterval = 100ms;
  o.softTimeout = 2s;
  o.hardTimeout = 3s;
  o.heartbeatInterval = 1s;
  o.heartbeatTimeout = 5s;
  // A spare waits for a whole iteration in the completion barrier and its
  // monitor applies this timeout to it there: longer than the demo's iterations.
  demoTimeout(&o.barrierTimeout, 60s, "NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS");
  demoTimeout(&o.completionTimeout, 90s, "NCCL_RESILIENT_RESTART_COMPLETION_TIMEOUT_MS");
  o.terminationGraceTime = 1s;
  o.finalizeTimeout = 5s;
  o.healthCheckTimeout = 5s;
  o.communicatorTimeout = 15s;
  if (config.nccl) {
    // Every rank of the host time-slices one GPU (docs/demo.md, "NCCL mode"):
    // NCCL's init and its first collective (which connects the ring through
    // the net plugin) take longer there than a host-engine step.
    o.softTimeout = 10s;
    o.hardTimeout = 15s;
    o.communicatorTimeout = 60s;
  }
  o.validate();
  return o;
}

}  // namespace resilient::demo
