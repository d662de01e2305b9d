#include "restart/monitor/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "common/file_descriptor.h"
#include "resilient/restart/errors.hpp"
#include "restart/monitor/monitor_executable.h"

extern char** environ;

namespace resilient::restart::monitor {

namespace {

// What the children report through the pipe.
struct Message {
  int kind;   // kPid or a failed step
  int value;  // the pid, or errno
};
constexpr int kPid = 0;
constexpr int kSetsid = 1;
constexpr int kFork = 2;
constexpr int kStdio = 3;
constexpr int kExec = 4;

const char* stepName(int kind) {
  switch (kind) {
    case kSetsid: return "setsid";
    case kFork: return "the second fork";
    case kStdio: return "redirecting stdin/stdout/stderr";
    case kExec: return "exec";
    default: return "an unknown step";
  }
}

// Async-signal-safe from here to the end of the namespace: nothing allocates.
void report(int fd, int kind, int value) {
  const Message m{kind, value};
  ssize_t n = 0;
  do {
    n = ::write(fd, &m, sizeof m);
  } while (n < 0 && errno == EINTR);
}

void closeRange(unsigned first, unsigned last) {
  if (first > last) {
    return;
  }
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0) == 0) {
    return;
  }
#endif
  const long max = ::sysconf(_SC_OPEN_MAX);
  const unsigned top =
      max > 0 ? std::min(last, static_cast<unsigned>(max - 1)) : std::min(last, 65535u);
  for (unsigned fd = first; fd <= top; ++fd) {
    ::close(static_cast<int>(fd));
  }
}

// Closes every descriptor above 2 except those of `keep` (ascending; a
// negative entry keeps nothing).
void closeAllBut(const int (&keep)[3]) {
  unsigned next = 3;
  for (const int k : keep) {
    if (k >= 0 && static_cast<unsigned>(k) >= next) {
      closeRange(next, static_cast<unsigned>(k) - 1);
      next = static_cast<unsigned>(k) + 1;
    }
  }
  closeRange(next, ~0u);
}

void keepOnExec(int fd) {
  const int flags = fd >= 0 ? ::fcntl(fd, F_GETFD) : -1;
  if (flags >= 0) {
    ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
  }
}

// The descriptors the monitor's exec deals with.
struct ExecFds {
  int pipe = -1;      // where failures are reported to the spawner
  int status = -1;    // the status page, left open for the monitor
  int liveness = -1;  // the monitor's end of the liveness link, left open; -1 none
  int log = -1;       // becomes stderr when >= 0
};

[[noreturn]] void execMonitor(ExecFds fds, const char* path, char* const* argv) {
  const int pipeFd = fds.pipe;
  const int statusFd = fds.status;
  const int logFd = fds.log;
  int keep[3] = {pipeFd, statusFd, fds.liveness};
  std::sort(std::begin(keep), std::end(keep));
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    ::sigaction(sig, &dfl, nullptr);  // fails harmlessly for SIGKILL, SIGSTOP, reserved ones
  }
  const int devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devNull < 0 || ::dup2(devNull, 0) < 0 || ::dup2(devNull, 1) < 0 ||
      (logFd >= 0 && ::dup2(logFd, 2) < 0)) {
    report(pipeFd, kStdio, errno);
    ::_exit(127);
  }
  closeAllBut(keep);  // devNull and logFd go too
  keepOnExec(statusFd);
  keepOnExec(fds.liveness);
  ::execve(path, argv, environ);
  report(pipeFd, kExec, errno);
  ::_exit(127);
}

}  // namespace

pid_t spawnMonitor(const MonitorConfig& given, const std::string& executable) {
  MonitorConfig config = given;
  config.logFile = expandRankPlaceholder(config.logFile, config.rank);
  config.pidFile = expandRankPlaceholder(config.pidFile, config.rank);
  config.blackboxDir = expandRankPlaceholder(config.blackboxDir, config.rank);
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("monitor process: ") + e.what());
  }
  if (::fcntl(config.statusFd, F_GETFD) < 0) {
    throw RestartError("monitor process: the status page descriptor " +
                       std::to_string(config.statusFd) + " is not open");
  }
  if (config.livenessFd >= 0 &&
      (config.livenessFd <= 2 || ::fcntl(config.livenessFd, F_GETFD) < 0)) {
    throw RestartError("monitor process: the liveness link descriptor " +
                       std::to_string(config.livenessFd) + " is not an open descriptor above 2");
  }
  const std::string path = findMonitorExecutable(executable);
  // stdin, stdout and stderr of the monitor are set below: a page that sits
  // there moves up first.
  FileDescriptor statusCopy;
  if (config.statusFd <= 2) {
    statusCopy.reset(::fcntl(config.statusFd, F_DUPFD_CLOEXEC, 3));
    if (!statusCopy.valid()) {
      throw RestartError(std::string("monitor process: dup of the status page descriptor: ") +
                         std::strerror(errno));
    }
    config.statusFd = statusCopy.get();
  }

  // Everything the children need, built before the fork.
  std::vector<std::string> args = config.arguments();
  args.insert(args.begin(), path);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  FileDescriptor logFd;
  if (!config.logFile.empty()) {
    logFd.reset(::open(config.logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!logFd.valid()) {
      throw RestartError("monitor process: cannot open its log file " + config.logFile + ": " +
                         std::strerror(errno));
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw RestartError(std::string("monitor process: pipe: ") + std::strerror(errno));
  }
  FileDescriptor readEnd(fds[0]);
  FileDescriptor writeEnd(fds[1]);

  const pid_t first = ::fork();
  if (first < 0) {
    throw RestartError(std::string("monitor process: fork: ") + std::strerror(errno));
  }
  if (first == 0) {
    // The intermediate child: a new session, the monitor, then exit.
    ::close(fds[0]);
    if (::setsid() < 0) {
      report(fds[1], kSetsid, errno);
      ::_exit(127);
    }
    const pid_t second = ::fork();
    if (second < 0) {
      report(fds[1], kFork, errno);
      ::_exit(127);
    }
    if (second == 0) {
      execMonitor({.pipe = fds[1],
                   .status = config.statusFd,
                   .liveness = config.livenessFd,
                   .log = logFd.get()},
                  path.c_str(), argv.data());
    }
    report(fds[1], kPid, second);
    ::_exit(0);
  }
  writeEnd.reset();
  int status = 0;
  while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
  }
  // Read until every write end is closed: the intermediate child exited and
  // the monitor exec'd (close-on-exec) or failed.
  pid_t monitorPid = -1;
  Message failure{-1, 0};
  Message m{};
  for (;;) {
    const ssize_t n = ::read(readEnd.get(), &m, sizeof m);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n != static_cast<ssize_t>(sizeof m)) {
      break;
    }
    if (m.kind == kPid) {
      monitorPid = m.value;
    } else if (failure.kind < 0) {
      failure = m;
    }
  }
  if (failure.kind >= 0) {
    throw RestartError(std::string("monitor process: ") + stepName(failure.kind) +
                       (failure.kind == kExec ? " of " + path : std::string()) +
                       " failed: " + std::strerror(failure.value));
  }
  if (monitorPid <= 0) {
    throw RestartError("monitor process: the intermediate child ended without starting it");
  }
  return monitorPid;
}

}  // namespace resilient::restart::monitor
