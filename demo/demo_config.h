// What one rank of the demo is told: its command line, and the restart
// Options the demo builds from it (demo-sized timeouts, 6 active ranks + the
// rest spares, one communicator "dp": the host engine, or NCCL with --nccl).
#pragma once

#include <string>

#include "resilient/restart.hpp"

namespace resilient::demo {

struct DemoConfig {
  std::string runDir;        // checkpoint, reports and monitor files (absolute)
  int steps = 200;           // training steps of the whole job
  int checkpointEvery = 20;  // active rank 0 checkpoints after every this many steps
  int stepMs = 20;           // simulated compute time of a step (ms)
  int payloadKb = 0;         // an extra all-reduce of this many KiB a step (gradient-like
                             // traffic: the links' health comparison needs some); checked
  int shards = 6;            // data shards = active world size
  float learningRate = 0.05F;
  std::string plugin;   // net plugin for the host communicator (empty: the default search)
  std::string monitor;  // resilient-monitor executable (empty: the library's search)
  // --nccl: "dp" is an NcclCommunicator and the all-reduce runs on GPU 0
  // (NCCL's own settings, NCCL_NET_PLUGIN included, come from the environment).
  bool nccl = false;
  std::string cudaLibrary;  // the CUDA runtime for --nccl (empty: libcudart.so.13, .so.12, .so)
  bool checkCuda = false;   // --check-cuda: only check that --nccl can run here, then exit
};

// Parses --run-dir=DIR --steps=N --checkpoint-every=N --step-ms=N --shards=N
// --plugin=PATH --monitor=PATH --nccl --cuda-library=PATH --check-cuda
// (--run-dir is required unless --check-cuda). Throws std::invalid_argument
// with a usage message on anything else.
DemoConfig parseCommandLine(int argc, char** argv);

// Options::fromEnvironment() (store URL, blackbox directory) with the demo's
// rank assignment, communicator (hostCommunicatorFactory, or
// ncclCommunicatorFactory with --nccl), monitor files and timeouts (the
// barrier and completion timeouts unless set in the environment), and hooks
// that do nothing but what demo/chaos.h injects; validated.
restart::Options demoOptions(const DemoConfig& config);

// The last iteration whose function this rank entered (set by the trainer).
extern int gEnteredIteration;

}  // namespace resilient::demo
