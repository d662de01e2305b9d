// Local launch of the ranks of a host-engine tool (resilient-nettest,
// resilient-net-ab): fork + exec of the tool itself once per rank with its
// environment, the start signal of the measured phase, timed process faults
// (SIGKILL / SIGSTOP of one rank) and the collection of exit statuses.
//
// Rank 0 inherits two descriptors: the rendezvous listening socket (bound by
// the launcher, so the port is known before any rank starts and no other
// process can take it) and the write end of the start pipe, on which it
// writes its CLOCK_MONOTONIC time (8 bytes) when the measured phase starts.
// launched_rank.h is the ranks' side of this.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace resilient::harness {

// "RANK@MS": a signal to one rank MS milliseconds into the measured phase.
struct TimedSignal {
  int rank = 0;
  int64_t atMs = 0;
};
Result<TimedSignal> parseTimedSignal(std::string_view text);

// "RANK:SPEC": NCCL_RESILIENT_FAULT=SPEC in that rank's environment only.
struct RankFault {
  int rank = 0;
  std::string spec;
};
Result<RankFault> parseRankFault(std::string_view text);

struct Injection {
  int rank = 0;
  int signal = 0;  // SIGKILL or SIGSTOP
  int64_t atMs = 0;
};

using EnvironmentList = std::vector<std::pair<std::string, std::string>>;

// This process's environment (environ), as NAME, value pairs.
EnvironmentList currentEnvironment();

// This process's environment read once (in main, before any thread exists),
// then looked up by name.
class Environment {
 public:
  static Environment snapshot();
  std::optional<std::string> get(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  // By name; the first of several entries of one name.
  EnvironmentList list() const { return {vars_.begin(), vars_.end()}; }

 private:
  std::map<std::string, std::string> vars_;
};

// `base` without the names in `overrides`, then `overrides`, as NAME=value.
std::vector<std::string> mergeEnvironment(const EnvironmentList& base,
                                          const EnvironmentList& overrides);

struct LaunchPlan {
  std::string executable;                      // absolute path (e.g. /proc/self/exe resolved)
  std::vector<std::string> argv;               // argv[0] included
  std::vector<std::vector<std::string>> envs;  // one complete environment per rank
  std::vector<int>
      rank0Fds;            // descriptors rank 0 inherits; launchRanks closes them after the forks
  int startPipeRead = -1;  // read end of the start pipe, or -1
  std::vector<Injection> injections;
  int64_t startTimeoutMs = 60000;  // no start signal by then: kill everything
  int64_t runTimeoutMs = 0;        // after the start: kill what is left; 0: no limit
  bool pinRanks = false;           // rank r runs only on the r-th CPU (modulo) this process may use
};

struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;  // normal exit (exitCode valid)
  int exitCode = -1;
  int termSignal = 0;      // killed by this signal
  int injectedSignal = 0;  // what the launcher sent it, 0: nothing
  uint64_t injectedNs = 0;
  bool killedAtEnd = false;  // a stopped rank, or one left at a deadline
};

struct LaunchOutcome {
  std::vector<RankOutcome> ranks;
  bool started = false;
  uint64_t startNs = 0;  // rank 0's monotonic time of the start
  bool startTimedOut = false;
  bool runTimedOut = false;
};

// Starts every rank, applies the injections, waits for every rank to end.
Result<LaunchOutcome> launchRanks(const LaunchPlan& plan);

// The common part of launching `nranks` local ranks of a tool that runs
// itself again (`argv`, `base` environment): the rendezvous socket bound on
// host:port (0: any free port) before any rank starts, the start pipe and a
// random job token. Rank r's environment gets RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and `names.token`; rank 0 also `names.listenFd`
// and `names.startFd` (the descriptors it inherits); `extra(r)` adds a
// rank's own variables. The caller sets timeouts, pinning and injections,
// then runs launchLocal.
struct LaunchEnvNames {
  const char* token = nullptr;
  const char* listenFd = nullptr;
  const char* startFd = nullptr;
};
struct LocalLaunchOptions {
  std::string host;   // MASTER_ADDR; the rendezvous socket is bound there
  uint16_t port = 0;  // 0: any free port
  int nranks = 0;
  std::vector<std::string> argv;  // the tool's own command line, argv[0] included
  EnvironmentList base;           // every rank's environment before the launch's variables
  LaunchEnvNames names;           // the tool's names for the token and rank 0's descriptors
  std::function<EnvironmentList(int rank)> extra;  // a rank's own variables; may be empty
};
struct LocalLaunch {
  LaunchPlan plan;
  uint16_t port = 0;
  uint64_t token = 0;
};
Result<LocalLaunch> planLocalLaunch(const LocalLaunchOptions& options);

// launchRanks(launch.plan), then the launcher's end of the start pipe closed.
Result<LaunchOutcome> launchLocal(LocalLaunch& launch);

// The running program's own path (/proc/self/exe), "" if unreadable: what
// a tool that launches its ranks executes again.
std::string selfExecutable();

// "exit 0", "exit 3", "SIGKILL", ...
std::string describeExit(const RankOutcome& rank);

}  // namespace resilient::harness
