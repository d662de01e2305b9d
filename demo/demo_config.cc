#include "demo_config.h"

#include <chrono>
#include <stdexcept>
#include <string_view>

namespace resilient::demo {

using namespace std::chrono_literals;

namespace {

const char* const kUsage =
    "usage: resilient-demo-train --run-dir=DIR [--steps=N] [--checkpoint-every=N] "
    "[--step-ms=N] [--shards=N] [--plugin=PATH] [--monitor=PATH] [--nccl] "
    "[--cuda-library=PATH]\n"
    "       resilient-demo-train --check-cuda [--cuda-library=PATH]\n"
    "RANK and WORLD_SIZE come from the environment, the store from NCCL_RESILIENT_STORE_URL.\n"
    "--plugin is the host communicator's net plugin (the default mode). --nccl makes the\n"
    "communicator with NCCL instead and all-reduces on GPU 0; NCCL's settings come from the\n"
    "environment (scripts/demo.py --nccl sets NCCL_HOSTID per rank, NCCL_NET_PLUGIN, ...).\n"
    "--cuda-library: the CUDA runtime to dlopen (default libcudart.so.13, .so.12, then .so).\n"
    "--check-cuda: exit 0 if --nccl can run here (a CUDA runtime and a device), else 77.";

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
  o.initialize = retryController(std::nullopt, config.shards, config.shards);
  if (config.nccl) {
    // NCCL's defaults: revoke on abort (NCCL >= 2.28.7), shrink when an
    // iteration only removed ranks; ncclCommInitRankConfig with the unique id
    // exchanged through the store otherwise.
    o.communicators = {{"dp", ncclCommunicatorFactory()}};
  } else {
    HostCommunicatorOptions host;
    host.plugin = config.plugin;
    host.operationTimeout = 30s;  // backstop only: the plugin's liveness timeout reports first
    o.communicators = {{"dp", hostCommunicatorFactory(host)}};
  }

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
  o.barrierTimeout = 60s;
  o.completionTimeout = 90s;
  o.lastCallWait = 50ms;
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
