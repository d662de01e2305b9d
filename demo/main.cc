// resilient-demo-train: one rank of the demo job (RANK, WORLD_SIZE and
// NCCL_RESILIENT_STORE_URL from the environment). scripts/demo.py starts 8 of
// them; docs/demo.md describes the run. Exit status: 0 completed, 3 this rank
// was discarded (a culprit replaced by a spare), 4 the job was aborted, 1 an
// error, 2 a bad command line, 77 --nccl (or --check-cuda) without a CUDA
// runtime or device (checked before anything starts).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chaos.h"
#include "checkpoint.h"
#include "crash_report.h"
#include "cuda_device.h"
#include "demo_config.h"
#include "report.h"
#include "resilient/restart.hpp"
#include "trainer.h"

int main(int argc, char** argv) {
  using namespace resilient;
  demo::installCrashReport();
  demo::DemoConfig config;
  try {
    config = demo::parseCommandLine(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const demo::CudaRuntime* cuda = nullptr;
  if (config.nccl || config.checkCuda) {
    try {
      cuda = demo::openCudaWithDevice(config.cudaLibrary);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "resilient-demo-train: %s\n", e.what());
      return 77;
    }
    if (config.checkCuda) {
      std::printf("resilient-demo-train: --nccl can run here (%s sees a CUDA device)\n",
                  cuda->library.c_str());
      return 0;
    }
  }
  // The loop sets RANK to each iteration's rank: the report is named after
  // the initial one, read before the loop starts.
  const char* rankText = std::getenv("RANK");
  // Under resilient-run a replacement has its predecessor's RANK: the
  // agent's process number (0 for the first) tells their reports apart.
  const char* processText = std::getenv("RESILIENT_RUN_PROCESS");
  const std::string reportPath =
      config.runDir + "/rank-" + (rankText != nullptr ? rankText : "unknown") +
      (processText != nullptr && std::string(processText) != "0" ? "." + std::string(processText)
                                                                  : std::string()) +
      ".json";
  demo::RankReport report;
  report.rank = rankText != nullptr ? std::atoi(rankText) : -1;
  report.before = demo::ProcessResources::now();
  int exitCode = 1;
  try {
    demo::chaosConfigure(rankText != nullptr ? std::atoi(rankText) : -1);
    restart::Wrapper wrapper(demo::demoOptions(config));
    demo::Trainer trainer(config, cuda);
    demo::chaosAt(demo::ChaosPhase::kStartup, 0);  // before the initial barrier (run's setup)
    try {
      const std::optional<std::vector<float>> weights =
          wrapper.run([&](restart::CallContext& ctx) { return trainer(ctx); });
      report.outcome = "completed";
      exitCode = 0;
      if (weights && wrapper.state().activeRank == 0) {
        demo::saveFloats(config.runDir + "/weights.bin", *weights);
      }
    } catch (const restart::RankDiscarded& e) {
      report.outcome = "discarded";
      report.message = e.what();
      exitCode = 3;
    } catch (const restart::RestartAbort& e) {
      report.outcome = "aborted";
      report.message = e.what();
      exitCode = 4;
    } catch (const std::exception& e) {
      report.outcome = "error";
      report.message = e.what();
    }
    report.rank = wrapper.state().initialRank;
    report.finalState = wrapper.state().describe();
    report.timeline = wrapper.timeline();
    report.events = trainer.events();
  } catch (const std::exception& e) {
    report.outcome = "error";
    report.message = e.what();
  }
  // Everything of the library is gone by now: what it opened, it closed.
  report.after = demo::ProcessResources::now();
  std::printf("outcome rank=%d %s%s%s\n", report.rank, report.outcome.c_str(),
              report.message.empty() ? "" : ": ", report.message.c_str());
  std::fflush(stdout);
  try {
    demo::writeReport(reportPath, report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-demo-train: %s\n", e.what());
    return 1;
  }
  return exitCode;
}
