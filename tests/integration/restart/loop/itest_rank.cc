// One rank of the restart loop's multi-process tests (test_loop_processes.cc
// starts N of them). It links libresilient-restart.so through the public API
// only: RANK and WORLD_SIZE from the environment, Options::fromEnvironment()
// (the driver sets the NCCL_RESILIENT_RESTART_* knobs), a HostCommunicator
// "dp" through the real net plugin, and a wrapped function that runs exact
// all-reduces. What goes wrong, where and when is chosen by the flags below.
// At the end it writes DIR/report-<rank>.json: how run() ended, the last
// State, the timeline, and the open descriptors and threads at every entry
// of the function. Marks (empty files DIR/mark-<what>-<rank>-<iteration>)
// let the driver wait for a phase without sleeping.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "resilient/restart.hpp"

namespace rr = resilient::restart;
using std::chrono::milliseconds;

namespace {

struct Flags {
  std::string dir;
  std::string plugin;
  int steps = 4;              // all-reduce steps per call
  int foreverUntil = 0;       // iterations < K step until interrupted
  int throwUntil = 0;         // iterations < K throw after the first step
  int failInitializeAt = -1;  // the initialize hook throws in iteration K
  int unhealthyAt = -1;       // the health check throws HealthCheckError in iteration K
  int finalizeSleepMs = 0;    // every finalize sleeps this long
  int finalizeBlockAt = -1;   // the finalize after iteration K marks and blocks 60 s
  int maxIterations = 0;      // >0: retryController(maxIterations)
  int maxActive = 0;          // >0: that many active ranks, the others spares
  int count = 1 << 16;        // floats per all-reduce
  std::string holdFile;       // after its steps, the function waits (pinging) until this exists
  int holdSilent = 0;         // 1: the wait does not ping (a hung rank)
  // >= 0: in iteration 0, before the all-reduce of this step, the function
  // spins without pinging until the hold file exists (alive, not entering
  // the collective the others wait in: a stuck rank).
  int stuckAtStep = -1;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      throw std::invalid_argument("flag " + a + " needs a value");
    }
    const std::string v = argv[++i];
    const auto n = [&v] { return std::stoi(v); };
    if (a == "--dir") f.dir = v;
    else if (a == "--plugin") f.plugin = v;
    else if (a == "--steps") f.steps = n();
    else if (a == "--forever-until") f.foreverUntil = n();
    else if (a == "--throw-until") f.throwUntil = n();
    else if (a == "--fail-initialize-at") f.failInitializeAt = n();
    else if (a == "--unhealthy-at") f.unhealthyAt = n();
    else if (a == "--finalize-sleep-ms") f.finalizeSleepMs = n();
    else if (a == "--finalize-block-at") f.finalizeBlockAt = n();
    else if (a == "--max-iterations") f.maxIterations = n();
    else if (a == "--max-active") f.maxActive = n();
    else if (a == "--count") f.count = n();
    else if (a == "--hold-file") f.holdFile = v;
    else if (a == "--hold-silent") f.holdSilent = n();
    else if (a == "--stuck-at-step") f.stuckAtStep = n();
    else throw std::invalid_argument("unknown flag " + a);
  }
  if (f.dir.empty()) {
    throw std::invalid_argument("--dir is required");
  }
  return f;
}

int entriesOf(const char* dir) {
  DIR* d = ::opendir(dir);
  if (d == nullptr) {
    return -1;
  }
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') {
      ++n;
    }
  }
  ::closedir(d);
  return n - (std::strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // opendir's own descriptor
}

// Resident set size in KiB (/proc/self/statm), -1 if unreadable.
long rssKb() {
  std::ifstream statm("/proc/self/statm");
  long size = 0;
  long resident = -1;
  statm >> size >> resident;
  return resident < 0 ? -1 : resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

const char* typeOf(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const rr::RestartAbort&) {
    return "RestartAbort";
  } catch (const rr::RankDiscarded&) {
    return "RankDiscarded";
  } catch (const rr::HealthCheckError&) {
    return "HealthCheckError";
  } catch (const rr::TimeoutError&) {
    return "TimeoutError";
  } catch (const rr::RestartError&) {
    return "RestartError";
  } catch (...) {
    return "other";
  }
}

std::string textOf(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "?";
  }
}

// DIR/mark-<what>-<rank>-<iteration>: a phase reached, for the driver.
void mark(const std::string& dir, const std::string& what, const std::string& tag, int iteration) {
  std::ofstream(dir + "/mark-" + what + "-" + tag + "-" + std::to_string(iteration)).put('\n');
}

// The library's log lines go to this rank's log file.
void logTo(const std::string& path) {
  const int logFd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (logFd >= 0) {
    ::dup2(logFd, 2);
    ::close(logFd);
  }
}

// The environment's options with the hooks the flags ask for.
rr::Options optionsFor(const Flags& flags, const std::string& tag) {
  rr::Options o = rr::Options::fromEnvironment();
  o.monitorLogFile = flags.dir + "/monitor-{rank}.log";
  o.monitorPidFile = flags.dir + "/monitor-{rank}.pid";
  rr::HostCommunicatorOptions hco;
  hco.plugin = flags.plugin;
  hco.operationTimeout = milliseconds(20000);
  o.communicators = {{"dp", rr::hostCommunicatorFactory(hco)}};
  if (flags.maxActive > 0) {
    o.rankAssignment = rr::compose(
        {rr::maxActiveWorldSize(flags.maxActive), rr::activateAllRanks(), rr::shiftRanks()});
  }
  std::vector<rr::InitializeFn> init;
  if (flags.maxIterations > 0) {
    init.push_back(rr::retryController(flags.maxIterations));
  }
  if (const int failAt = flags.failInitializeAt; failAt >= 0) {
    init.push_back([failAt](const rr::State& s) {
      if (s.iteration == failAt) {
        throw std::runtime_error("itest: initialize fails in iteration " +
                                 std::to_string(s.iteration));
      }
    });
  }
  o.initialize = rr::composeInitialize(init);
  if (const int unhealthyAt = flags.unhealthyAt; unhealthyAt >= 0) {
    o.healthCheck = [unhealthyAt, tag](const rr::State& s) {
      if (s.iteration == unhealthyAt) {
        throw rr::HealthCheckError("itest: rank " + tag + " unhealthy in iteration " +
                                   std::to_string(s.iteration));
      }
    };
  }
  const int sleepMs = flags.finalizeSleepMs;
  const int blockAt = flags.finalizeBlockAt;
  const std::string dir = flags.dir;
  o.finalize = [sleepMs, blockAt, dir, tag](const rr::State& s) {
    if (s.iteration == blockAt) {
      mark(dir, "finalize-blocked", tag, s.iteration);
      std::this_thread::sleep_for(milliseconds(60000));  // killed by the driver meanwhile
    }
    if (sleepMs > 0) {
      std::this_thread::sleep_for(milliseconds(sleepMs));  // overruns finalizeTimeout
    }
    mark(dir, "finalized", tag, s.iteration);
  };
  return o;
}

// Waits, polling, for a file the driver creates.
void waitForFile(const std::string& path, const std::function<void()>& meanwhile = {}) {
  while (!std::filesystem::exists(path)) {
    if (meanwhile) {
      meanwhile();
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// One all-reduce of step `step` over the active ranks, its result checked.
void checkedAllReduce(rr::HostCommunicator& comm, std::vector<float>& data, int step, int me,
                      int n) {
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<float>((i + static_cast<size_t>(step + me)) % 5);
  }
  comm.allReduce(data.data(), data.data(), data.size());
  for (size_t i = 0; i < data.size(); i += 997) {
    float want = 0;
    for (int r = 0; r < n; ++r) {
      want += static_cast<float>((i + static_cast<size_t>(step + r)) % 5);
    }
    if (data[i] != want) {
      throw std::logic_error("all-reduce result wrong at step " + std::to_string(step));
    }
  }
}

// The wrapped function: the flags' steps, faults and holds.
void train(rr::CallContext& ctx, const Flags& flags, const std::string& tag,
           std::vector<float>& data, nlohmann::json& report) {
  const int k = ctx.iteration();
  report["entries"].push_back({{"iteration", k},
                               {"fds", entriesOf("/proc/self/fd")},
                               {"threads", entriesOf("/proc/self/task")},
                               {"rssKb", rssKb()},
                               {"activeRank", ctx.state().activeRank}});
  // Through the library's exported type information.
  auto* comm = dynamic_cast<rr::HostCommunicator*>(ctx.communicator("dp"));
  if (comm == nullptr) {
    throw std::logic_error("no host communicator 'dp' on an active rank");
  }
  for (int step = 0; k < flags.foreverUntil || step < flags.steps; ++step) {
    if (k == 0 && step == flags.stuckAtStep) {
      mark(flags.dir, "stuck", tag, k);
      waitForFile(flags.holdFile);  // alive, not pinging, not in the collective
    }
    checkedAllReduce(*comm, data, step, ctx.state().activeRank, ctx.state().activeWorldSize);
    ctx.ping();
    if (step == 0) {
      mark(flags.dir, "running", tag, k);
      if (k < flags.throwUntil) {
        throw std::runtime_error("itest: rank " + tag + " throws in iteration " +
                                 std::to_string(k));
      }
    }
  }
  if (!flags.holdFile.empty()) {
    waitForFile(flags.holdFile, [&] {
      if (flags.holdSilent == 0) {
        ctx.ping();
      }
    });
  }
  report["steps"] = flags.steps;
}

void writeReport(const std::string& path, const nlohmann::json& report) {
  {
    std::ofstream out(path + ".tmp");
    out << report.dump(1) << '\n';
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  try {
    flags = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "itest-rank: %s\n", e.what());
    return 2;
  }
  const char* rankText = std::getenv("RANK");  // NOLINT(concurrency-mt-unsafe): before threads
  const int rank = rankText != nullptr ? std::atoi(rankText) : -1;
  const std::string tag = std::to_string(rank);
  logTo(flags.dir + "/rank-" + tag + ".log");

  nlohmann::json report = {{"rank", rank}, {"pid", ::getpid()}, {"entries", nlohmann::json::array()}};
  int exitCode = 0;
  try {
    rr::Wrapper wrapper(optionsFor(flags, tag));
    std::vector<float> data(static_cast<size_t>(flags.count));
    try {
      wrapper.run([&](rr::CallContext& ctx) { train(ctx, flags, tag, data, report); });
      report["outcome"] = "completed";
    } catch (...) {
      report["outcome"] = typeOf(std::current_exception());
      report["error"] = textOf(std::current_exception());
    }
    const rr::State& s = wrapper.state();
    report["state"] = {{"iteration", s.iteration},     {"rank", s.rank},
                       {"worldSize", s.worldSize},     {"activeRank", s.activeRank},
                       {"activeWorldSize", s.activeWorldSize},
                       {"mode", s.describe()}};
    report["timeline"] = nlohmann::json::parse(rr::timelineJson(wrapper.timeline()));
  } catch (...) {
    report["outcome"] = "setup failed";
    report["error"] = textOf(std::current_exception());
    exitCode = 1;
  }
  writeReport(flags.dir + "/report-" + tag + ".json", report);
  return exitCode;
}
