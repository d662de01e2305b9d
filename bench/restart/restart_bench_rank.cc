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

// The command line.
struct BenchArgs {
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
  // -1: the library's default (Options::fromEnvironment(), so the
  // NCCL_RESILIENT_* knobs too): a run without options measures what a user
  // gets.
  int64_t monitorThreadMs = -1;
  int64_t monitorProcessMs = -1;
  int64_t heartbeatMs = -1;
  int64_t heartbeatTimeoutMs = -1;
  int64_t progressMs = -1;
  bool monitorProcess = true;
};

void addOptions(CLI::App& app, BenchArgs& a) {
  app.add_option("--store", a.storeUrl, "tcp://HOST:PORT of the resilient-store")->required();
  app.add_option("--job", a.jobId, "job id (the store's key prefix)");
  app.add_option("--rank", a.rank, "initial rank")->required();
  app.add_option("--world", a.world, "initial world size")->required();
  app.add_option("--out", a.out, "write the timeline here as JSON at exit")->required();
  app.add_option("--ready-dir", a.readyDir, "create <dir>/<rank> after --ready-steps steps")
      ->required();
  app.add_option("--log-dir", a.logDir, "monitor process logs and pid files (absolute)")
      ->required();
  app.add_option("--ready-steps", a.readySteps, "steps of iteration 0 before the ready file");
  app.add_option("--steps-after", a.stepsAfter,
                 "steps of a later iteration, then return (0: at once)");
  app.add_option("--count", a.count, "floats per all-reduce");
  app.add_option("--compute-us", a.computeUs, "sleep per step (stands in for compute)");
  app.add_option("--monitor-thread-interval-ms", a.monitorThreadMs,
                 "Options::monitorThreadInterval");
  app.add_option("--monitor-process-interval-ms", a.monitorProcessMs,
                 "Options::monitorProcessInterval");
  app.add_option("--heartbeat-interval-ms", a.heartbeatMs, "Options::heartbeatInterval");
  app.add_option("--heartbeat-timeout-ms", a.heartbeatTimeoutMs, "Options::heartbeatTimeout");
  app.add_option("--progress-interval-ms", a.progressMs, "Options::progressWatchdogInterval");
  app.add_option("--monitor-process", a.monitorProcess, "Options::useMonitorProcess");
}

Options optionsOf(const BenchArgs& a) {
  Options options = Options::fromEnvironment();
  options.storeUrl = a.storeUrl;
  options.jobId = a.jobId;
  options.rank = a.rank;
  options.worldSize = a.world;
  const auto given = [](int64_t ms, milliseconds& option) {
    if (ms >= 0) {
      option = milliseconds(ms);
    }
  };
  given(a.monitorThreadMs, options.monitorThreadInterval);
  given(a.monitorProcessMs, options.monitorProcessInterval);
  given(a.heartbeatMs, options.heartbeatInterval);
  given(a.heartbeatTimeoutMs, options.heartbeatTimeout);
  given(a.progressMs, options.progressWatchdogInterval);
  options.useMonitorProcess = a.monitorProcess;
  options.monitorExecutable = RESILIENT_BENCH_MONITOR;
  options.monitorLogFile = a.logDir + "/monitor-{rank}.log";
  options.monitorPidFile = a.logDir + "/monitor-{rank}.pid";
  HostCommunicatorOptions host;
  host.plugin = RESILIENT_BENCH_PLUGIN;
  host.bufferBytes = size_t{256} << 10;
  options.communicators = {{"bench", hostCommunicatorFactory(host)}};
  return options;
}

// The wrapped function: checked all-reduces, one per step, until the restart
// (iteration 0) or --steps-after steps (later ones).
void runSteps(CallContext& ctx, const BenchArgs& a, std::map<int, long>& stepsPerIteration) {
  // The only factory is hostCommunicatorFactory.
  auto* comm = static_cast<HostCommunicator*>(ctx.communicator());
  if (comm == nullptr) {
    throw std::runtime_error("no host communicator in this iteration");
  }
  const int me = ctx.state().activeRank;
  const int n = ctx.state().activeWorldSize;
  const size_t count = a.count;
  std::vector<float> data(count);
  for (long step = 0;; ++step) {
    if (ctx.iteration() > 0 && step >= a.stepsAfter) {
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
                                 std::to_string(ctx.iteration()) + " step " + std::to_string(step));
      }
    }
    ctx.ping();
    stepsPerIteration[ctx.iteration()] = step + 1;
    if (ctx.iteration() == 0 && step + 1 == a.readySteps) {
      touch(a.readyDir + "/" + std::to_string(a.rank));
    }
    if (a.computeUs > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(a.computeUs));
    }
  }
}

void writeReport(const BenchArgs& a, const Options& options,
                 const std::map<int, long>& stepsPerIteration, const std::string& error, int rc,
                 const Wrapper* wrapper) {
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& [it, stepsDone] : stepsPerIteration) {
    steps[std::to_string(it)] = stepsDone;
  }
  const nlohmann::json report = {
      {"rank", a.rank},
      {"world", a.world},
      {"pid", ::getpid()},
      {"ok", rc == 0},
      {"error", error},
      {"steps", steps},
      // The settings in effect (the library's defaults unless given), for the
      // script's header.
      {"settings",
       {{"monitor_thread_interval_ms", options.monitorThreadInterval.count()},
        {"monitor_process_interval_ms", options.monitorProcessInterval.count()},
        {"heartbeat_interval_ms", options.heartbeatInterval.count()},
        {"heartbeat_timeout_ms", options.heartbeatTimeout.count()},
        {"progress_interval_ms", options.progressWatchdogInterval.count()}}},
      {"timeline", nlohmann::json::parse(timelineJson(wrapper ? wrapper->timeline()
                                                              : std::vector<TimelineEvent>{}))}};
  std::ofstream(a.out) << report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
                       << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One rank of the restart-latency benchmark (run by scripts/bench_restart.py)."};
  BenchArgs a;
  addOptions(app, a);
  CLI11_PARSE(app, argc, argv);

  const Options options = optionsOf(a);
  std::map<int, long> stepsPerIteration;
  std::string error;
  int rc = 0;
  std::unique_ptr<Wrapper> wrapper;
  try {
    wrapper = std::make_unique<Wrapper>(options);
    wrapper->run([&](CallContext& ctx) { runSteps(ctx, a, stepsPerIteration); });
  } catch (const std::exception& e) {
    error = e.what();
    rc = 2;
  }
  writeReport(a, options, stepsPerIteration, error, rc, wrapper.get());
  if (rc != 0) {
    std::fprintf(stderr, "rank %d: %s\n", a.rank, error.c_str());
  }
  return rc;
}
