// One rank of the restart-latency benchmark (scripts/bench_restart.py starts
// N of them on a resilient-store and SIGKILLs one; docs/performance.md,
// "Restart library: restart latency").
//
// The rank wraps a function with resilient::restart::Wrapper (the public
// API only): a loop of small sum all-reduces on the iteration's
// HostCommunicator (libnccl-net-resilient.so on loopback), ping() after each
// step, every result checked. In iteration 0 it writes <ready-dir>/<rank>
// after --ready-steps steps and runs until the restart interrupts it; in a
// later iteration it returns after --steps-after steps, so the job
// completes. At exit it writes its timeline (Wrapper::timeline(): phase,
// CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds) as JSON to --out.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "resilient/restart.hpp"

#ifndef RESILIENT_BENCH_PLUGIN
#error "RESILIENT_BENCH_PLUGIN must name libnccl-net-resilient.so"
#endif
#ifndef RESILIENT_BENCH_MONITOR
#error "RESILIENT_BENCH_MONITOR must name resilient-monitor"
#endif

using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

void touch(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One rank of the restart-latency benchmark (run by scripts/bench_restart.py)."};
  std::string storeUrl;
  std::string jobId = "bench";
  int rank = -1;
  int world = -1;
  std::string out;
  std::string readyDir;
  std::string logDir;
  int readySteps = 10;
  int stepsAfter = 20;
  size_t count = 1024;
  int computeUs = 0;
  int64_t lastCallWaitMs = 20;
  int64_t monitorThreadMs = 100;
  int64_t monitorProcessMs = 100;
  int64_t heartbeatMs = 500;
  int64_t heartbeatTimeoutMs = 10000;
  int64_t progressMs = 100;
  bool monitorProcess = true;
  app.add_option("--store", storeUrl, "tcp://HOST:PORT of the resilient-store")->required();
  app.add_option("--job", jobId, "job id (the store's key prefix)");
  app.add_option("--rank", rank, "initial rank")->required();
  app.add_option("--world", world, "initial world size")->required();
  app.add_option("--out", out, "write the timeline here as JSON at exit")->required();
  app.add_option("--ready-dir", readyDir, "create <dir>/<rank> after --ready-steps steps")
      ->required();
  app.add_option("--log-dir", logDir, "monitor process logs and pid files (absolute)")->required();
  app.add_option("--ready-steps", readySteps, "steps of iteration 0 before the ready file");
  app.add_option("--steps-after", stepsAfter,
                 "steps of a later iteration, then return (0: at once)");
  app.add_option("--count", count, "floats per all-reduce");
  app.add_option("--compute-us", computeUs, "sleep per step (stands in for compute)");
  app.add_option("--last-call-wait-ms", lastCallWaitMs, "Options::lastCallWait");
  app.add_option("--monitor-thread-interval-ms", monitorThreadMs, "Options::monitorThreadInterval");
  app.add_option("--monitor-process-interval-ms", monitorProcessMs,
                 "Options::monitorProcessInterval");
  app.add_option("--heartbeat-interval-ms", heartbeatMs, "Options::heartbeatInterval");
  app.add_option("--heartbeat-timeout-ms", heartbeatTimeoutMs, "Options::heartbeatTimeout");
  app.add_option("--progress-interval-ms", progressMs, "Options::progressWatchdogInterval");
  app.add_option("--monitor-process", monitorProcess, "Options::useMonitorProcess");
  CLI11_PARSE(app, argc, argv);

  Options options = Options::fromEnvironment();
  options.storeUrl = storeUrl;
  options.jobId = jobId;
  options.rank = rank;
  options.worldSize = world;
  options.lastCallWait = milliseconds(lastCallWaitMs);
  options.monitorThreadInterval = milliseconds(monitorThreadMs);
  options.monitorProcessInterval = milliseconds(monitorProcessMs);
  options.heartbeatInterval = milliseconds(heartbeatMs);
  options.heartbeatTimeout = milliseconds(heartbeatTimeoutMs);
  options.progressWatchdogInterval = milliseconds(progressMs);
  options.useMonitorProcess = monitorProcess;
  options.monitorExecutable = RESILIENT_BENCH_MONITOR;
  options.monitorLogFile = logDir + "/monitor-{rank}.log";
  options.monitorPidFile = logDir + "/monitor-{rank}.pid";
  HostCommunicatorOptions host;
  host.plugin = RESILIENT_BENCH_PLUGIN;
  host.bufferBytes = size_t{256} << 10;
  options.communicators = {{"bench", hostCommunicatorFactory(host)}};

  std::map<int, long> stepsPerIteration;
  std::string error;
  int rc = 0;
  std::unique_ptr<Wrapper> wrapper;
  try {
    wrapper = std::make_unique<Wrapper>(options);
    wrapper->run([&](CallContext& ctx) {
      // The only factory is hostCommunicatorFactory.
      auto* comm = static_cast<HostCommunicator*>(ctx.communicator());
      if (comm == nullptr) {
        throw std::runtime_error("no host communicator in this iteration");
      }
      const int me = ctx.state().activeRank;
      const int n = ctx.state().activeWorldSize;
      std::vector<float> data(count);
      for (long step = 0;; ++step) {
        if (ctx.iteration() > 0 && step >= stepsAfter) {
          return;
        }
        for (size_t i = 0; i < count; ++i) {
          data[i] = static_cast<float>((i + static_cast<size_t>(step + me)) % 7);
        }
        comm->allReduce(data.data(), data.data(), count);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r) {
            want += static_cast<float>((i + static_cast<size_t>(step + r)) % 7);
          }
          if (data[i] != want) {
            throw std::runtime_error("wrong all-reduce result in iteration " +
                                     std::to_string(ctx.iteration()) + " step " +
                                     std::to_string(step));
          }
        }
        ctx.ping();
        stepsPerIteration[ctx.iteration()] = step + 1;
        if (ctx.iteration() == 0 && step + 1 == readySteps) {
          touch(readyDir + "/" + std::to_string(rank));
        }
        if (computeUs > 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(computeUs));
        }
      }
    });
  } catch (const std::exception& e) {
    error = e.what();
    rc = 2;
  }

  nlohmann::json steps = nlohmann::json::object();
  for (const auto& [it, stepsDone] : stepsPerIteration) {
    steps[std::to_string(it)] = stepsDone;
  }
  const nlohmann::json report = {
      {"rank", rank},
      {"world", world},
      {"pid", ::getpid()},
      {"ok", rc == 0},
      {"error", error},
      {"steps", steps},
      {"timeline", nlohmann::json::parse(timelineJson(wrapper ? wrapper->timeline()
                                                              : std::vector<TimelineEvent>{}))}};
  std::ofstream(out) << report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
                     << '\n';
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s\n", rank, error.c_str());
  }
  return rc;
}
