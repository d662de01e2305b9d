#include "tools/harness/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <random>
#include <set>

#include "common/clock.h"
#include "common/file_descriptor.h"
#include "common/net/socket.h"
#include "common/net/socket_address.h"

namespace resilient::harness {
namespace {

Result<int64_t> parseNumber(std::string_view text, const char* what, std::string_view whole) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) {
    return invalidUsage("bad " + std::string(what) + " in '" + std::string(whole) + "'");
  }
  return value;
}

const char* signalName(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGSTOP: return "SIGSTOP";
    case SIGTERM: return "SIGTERM";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGINT: return "SIGINT";
    default: return nullptr;
  }
}

}  // namespace

Result<TimedSignal> parseTimedSignal(std::string_view text) {
  const size_t at = text.find('@');
  if (at == std::string_view::npos) {
    return invalidUsage("expected RANK@MS, got '" + std::string(text) + "'");
  }
  Result<int64_t> rank = parseNumber(text.substr(0, at), "rank", text);
  if (!rank.ok()) {
    return rank.status();
  }
  Result<int64_t> ms = parseNumber(text.substr(at + 1), "milliseconds", text);
  if (!ms.ok()) {
    return ms.status();
  }
  if (*rank > 1000000 || *ms > 86400000) {
    return invalidUsage("rank or time out of range in '" + std::string(text) + "'");
  }
  return TimedSignal{static_cast<int>(*rank), *ms};
}

Result<RankFault> parseRankFault(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon + 1 >= text.size()) {
    return invalidUsage("expected RANK:SPEC, got '" + std::string(text) + "'");
  }
  Result<int64_t> rank = parseNumber(text.substr(0, colon), "rank", text);
  if (!rank.ok()) {
    return rank.status();
  }
  if (*rank > 1000000) {
    return invalidUsage("rank out of range in '" + std::string(text) + "'");
  }
  return RankFault{static_cast<int>(*rank), std::string(text.substr(colon + 1))};
}

std::vector<std::string> mergeEnvironment(const EnvironmentList& base,
                                          const EnvironmentList& overrides) {
  std::set<std::string> replaced;
  for (const auto& [name, value] : overrides) {
    replaced.insert(name);
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : base) {
    if (replaced.count(name) == 0) {
      out.push_back(name + "=" + value);
    }
  }
  for (const auto& [name, value] : overrides) {
    out.push_back(name + "=" + value);
  }
  return out;
}

std::string describeExit(const RankOutcome& rank) {
  if (rank.exited) {
    return "exit " + std::to_string(rank.exitCode);
  }
  if (rank.termSignal != 0) {
    const char* name = signalName(rank.termSignal);
    return name != nullptr ? std::string(name) : "signal " + std::to_string(rank.termSignal);
  }
  return "running";
}

namespace {

// Everything exec needs, built before the first fork (the children make only
// async-signal-safe calls).
struct ExecArgs {
  std::vector<char*> argv;
  std::vector<std::vector<char*>> envps;  // per rank
};

ExecArgs execArgsOf(const LaunchPlan& plan) {
  ExecArgs e;
  for (const std::string& a : plan.argv) {
    e.argv.push_back(const_cast<char*>(a.c_str()));
  }
  e.argv.push_back(nullptr);
  e.envps.resize(plan.envs.size());
  for (size_t r = 0; r < plan.envs.size(); ++r) {
    for (const std::string& v : plan.envs[r]) {
      e.envps[r].push_back(const_cast<char*>(v.c_str()));
    }
    e.envps[r].push_back(nullptr);
  }
  return e;
}

// Pinning: rank r on the (r mod count)-th CPU of our own affinity mask;
// empty when the plan does not pin.
Result<std::vector<cpu_set_t>> pinsOf(const LaunchPlan& plan) {
  std::vector<cpu_set_t> pins;
  if (!plan.pinRanks) {
    return pins;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return systemError("sched_getaffinity", errno);
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpus.push_back(cpu);
    }
  }
  pins.resize(plan.envs.size());
  for (size_t r = 0; r < pins.size() && !cpus.empty(); ++r) {
    CPU_ZERO(&pins[r]);
    CPU_SET(cpus[r % cpus.size()], &pins[r]);
  }
  return pins;
}

void killAll(LaunchOutcome& outcome, int sig) {
  for (RankOutcome& r : outcome.ranks) {
    if (r.pid > 0 && !r.exited && r.termSignal == 0) {
      ::kill(r.pid, sig);
    }
  }
}

// Forks and execs every rank; on a failed fork the ranks already started are
// killed and reaped.
Status forkRanks(const LaunchPlan& plan, LaunchOutcome& outcome) {
  ExecArgs exec = execArgsOf(plan);
  Result<std::vector<cpu_set_t>> pins = pinsOf(plan);
  RESILIENT_TRY(pins.status());
  const pid_t parent = ::getpid();
  for (size_t r = 0; r < plan.envs.size(); ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      killAll(outcome, SIGKILL);
      while (::waitpid(-1, nullptr, 0) > 0) {
      }
      return systemError("fork", err);
    }
    if (pid == 0) {
      // Child: async-signal-safe calls only.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) {
        ::_exit(125);
      }
      if (!pins->empty() && ::sched_setaffinity(0, sizeof (*pins)[r], &(*pins)[r]) != 0) {
        ::_exit(126);
      }
      if (r == 0) {
        for (int fd : plan.rank0Fds) {
          ::fcntl(fd, F_SETFD, 0);
        }
      }
      ::execve(plan.executable.c_str(), exec.argv.data(), exec.envps[r].data());
      ::_exit(127);
    }
    outcome.ranks[r].rank = static_cast<int>(r);
    outcome.ranks[r].pid = pid;
  }
  for (int fd : plan.rank0Fds) {
    ::close(fd);  // rank 0 has its own copies now
  }
  return {};
}

// The launcher's watch over its running ranks: the start time from rank 0's
// pipe, the timed injections, the deadlines and the exits.
class Watch {
 public:
  Watch(const LaunchPlan& plan, LaunchOutcome& outcome)
      : plan_(plan),
        outcome_(outcome),
        hardDeadline_(monotonicNs() + static_cast<uint64_t>(plan.startTimeoutMs) * 1000000ull),
        pipeOpen_(plan.startPipeRead >= 0),
        live_(plan.envs.size()) {
    for (const Injection& i : plan.injections) {
      pending_.push_back({i, false});
    }
  }

  void run() {
    while (live_ > 0) {
      killIfOnlyStoppedLeft();
      waitForStart();
      const uint64_t now = monotonicNs();
      inject(now);
      enforceDeadline(now);
      reap();
    }
  }

 private:
  struct Pending {
    Injection injection;
    bool done = false;
  };

  // Ranks still running that were not stopped by us: when none is left,
  // nothing will wake the stopped ones.
  void killIfOnlyStoppedLeft() {
    for (const RankOutcome& r : outcome_.ranks) {
      if (!r.exited && r.termSignal == 0 && r.injectedSignal != SIGSTOP) {
        return;
      }
    }
    for (RankOutcome& r : outcome_.ranks) {
      if (!r.exited && r.termSignal == 0) {
        r.killedAtEnd = true;
        ::kill(r.pid, SIGKILL);
      }
    }
  }

  // A millisecond's wait for the start time (readable, or closed).
  void waitForStart() {
    bool readable = false;
    if (pipeOpen_) {
      const Result<bool> ready = waitReady(plan_.startPipeRead, POLLIN, 1);
      readable = !ready.ok() || *ready;
    } else {
      ::usleep(1000);
    }
    if (!readable) {
      return;
    }
    const ssize_t got = ::read(plan_.startPipeRead, startBytes_ + startGot_, 8 - startGot_);
    if (got > 0) {
      startGot_ += static_cast<size_t>(got);
      if (startGot_ == 8) {
        uint64_t ns = 0;
        memcpy(&ns, startBytes_, 8);
        outcome_.started = true;
        outcome_.startNs = ns;
        hardDeadline_ = plan_.runTimeoutMs > 0
                            ? ns + static_cast<uint64_t>(plan_.runTimeoutMs) * 1000000ull
                            : UINT64_MAX;
        pipeOpen_ = false;
      }
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      pipeOpen_ = false;  // rank 0 is gone before the start
    }
  }

  void inject(uint64_t now) {
    if (!outcome_.started) {
      return;
    }
    for (Pending& i : pending_) {
      const uint64_t due = outcome_.startNs + static_cast<uint64_t>(i.injection.atMs) * 1000000ull;
      RankOutcome& target = outcome_.ranks[static_cast<size_t>(i.injection.rank)];
      if (!i.done && now >= due) {
        i.done = true;
        if (!target.exited && target.termSignal == 0) {
          target.injectedNs = monotonicNs();
          target.injectedSignal = i.injection.signal;
          ::kill(target.pid, i.injection.signal);
        }
      }
    }
  }

  void enforceDeadline(uint64_t now) {
    if (now <= hardDeadline_) {
      return;
    }
    (outcome_.started ? outcome_.runTimedOut : outcome_.startTimedOut) = true;
    for (RankOutcome& r : outcome_.ranks) {
      if (!r.exited && r.termSignal == 0) {
        r.killedAtEnd = true;
      }
    }
    killAll(outcome_, SIGKILL);
    hardDeadline_ = UINT64_MAX;
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) {
        return;
      }
      for (RankOutcome& r : outcome_.ranks) {
        if (r.pid != pid) {
          continue;
        }
        if (WIFEXITED(status)) {
          r.exited = true;
          r.exitCode = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          r.termSignal = WTERMSIG(status);
        }
        --live_;
      }
    }
  }

  const LaunchPlan& plan_;
  LaunchOutcome& outcome_;
  uint64_t hardDeadline_;
  bool pipeOpen_;
  uint8_t startBytes_[8] = {};
  size_t startGot_ = 0;
  size_t live_;
  std::vector<Pending> pending_;
};

}  // namespace

Result<LaunchOutcome> launchRanks(const LaunchPlan& plan) {
  LaunchOutcome outcome;
  outcome.ranks.resize(plan.envs.size());
  RESILIENT_TRY(forkRanks(plan, outcome));
  Watch(plan, outcome).run();
  return outcome;
}

Result<LocalLaunch> planLocalLaunch(const LocalLaunchOptions& options) {
  const std::string& host = options.host;
  const uint16_t port = options.port;
  const int nranks = options.nranks;
  const LaunchEnvNames& names = options.names;
  Result<FileDescriptor> listenFd = listenOn(host, port, {.backlog = 1024, .reuseAddress = true});
  if (!listenFd.ok()) {
    return Status::error(
        listenFd.status().kind(),
        "rendezvous on " + host + ":" + std::to_string(port) + ": " + listenFd.status().message());
  }
  LocalLaunch launch;
  launch.port = localAddressOf(listenFd->get()).port();
  int startPipe[2] = {-1, -1};
  if (::pipe2(startPipe, O_CLOEXEC) != 0) {
    return systemError("pipe2", errno);
  }
  std::random_device random;
  launch.token = (static_cast<uint64_t>(random()) << 32) ^ random();
  char tokenText[32];
  std::snprintf(tokenText, sizeof tokenText, "%016llx",
                static_cast<unsigned long long>(launch.token));
  LaunchPlan& plan = launch.plan;
  plan.executable = selfExecutable();
  plan.argv = options.argv;
  const int listenRaw = listenFd->release();
  plan.rank0Fds = {listenRaw, startPipe[1]};
  plan.startPipeRead = startPipe[0];
  for (int r = 0; r < nranks; ++r) {
    EnvironmentList overrides = {{"RANK", std::to_string(r)},
                                 {"LOCAL_RANK", std::to_string(r)},
                                 {"WORLD_SIZE", std::to_string(nranks)},
                                 {"MASTER_ADDR", host},
                                 {"MASTER_PORT", std::to_string(launch.port)},
                                 {names.token, tokenText}};
    if (r == 0) {
      overrides.emplace_back(names.listenFd, std::to_string(listenRaw));
      overrides.emplace_back(names.startFd, std::to_string(startPipe[1]));
    }
    if (options.extra) {
      for (auto& kv : options.extra(r)) {
        overrides.push_back(std::move(kv));
      }
    }
    plan.envs.push_back(mergeEnvironment(options.base, overrides));
  }
  return launch;
}

Result<LaunchOutcome> launchLocal(LocalLaunch& launch) {
  Result<LaunchOutcome> outcome = launchRanks(launch.plan);
  ::close(launch.plan.startPipeRead);
  launch.plan.startPipeRead = -1;
  return outcome;
}

EnvironmentList currentEnvironment() {
  EnvironmentList list;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) {
      list.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
  }
  return list;
}

Environment Environment::snapshot() {
  Environment env;
  for (auto& [name, value] : currentEnvironment()) {
    env.vars_.emplace(std::move(name), std::move(value));
  }
  return env;
}

std::optional<std::string> Environment::get(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::string Environment::get(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::string selfExecutable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    return {};
  }
  path[n] = '\0';
  return path;
}

}  // namespace resilient::harness
