#include "restart/monitor/rank_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "common/net/socket.h"

namespace resilient::restart::monitor {

namespace {

// State letter and start time (clock ticks since boot) from /proc/<pid>/stat;
// false when the process does not exist.
bool readStat(pid_t pid, char* state, uint64_t* startTicks) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    return false;
  }
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') {
    return false;
  }
  p += 2;
  *state = *p;
  // Field 3 is the state; the start time is field 22.
  for (int field = 3; field < 22 && p != nullptr; ++field) {
    p = std::strchr(p, ' ');
    if (p != nullptr) {
      ++p;
    }
  }
  *startTicks = p != nullptr ? std::strtoull(p, nullptr, 10) : 0;
  return true;
}

}  // namespace

RankProcess::RankProcess(pid_t pid, Watch watch) : pid_(pid) {
  if (watch == Watch::kAuto) {
#ifdef SYS_pidfd_open
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd_.valid() && errno == ESRCH) {
      ended_ = true;
      return;
    }
#endif
  }
  if (!pidfd_.valid()) {
    char state = 0;
    if (!readStat(pid, &state, &startTicks_) || state == 'Z' || state == 'X') {
      ended_ = true;
    }
  }
}

bool RankProcess::probeEnded() {
  char state = 0;
  uint64_t start = 0;
  if (!readStat(pid_, &state, &start)) {
    return true;
  }
  return state == 'Z' || state == 'X' || start != startTicks_;
}

bool RankProcess::ended() {
  return waitForEnd(std::chrono::milliseconds(0));
}

bool RankProcess::waitForEnd(std::chrono::milliseconds timeout) {
  if (ended_) {
    return true;
  }
  if (pidfd_.valid()) {
    const Result<bool> readable =
        waitReady(pidfd_.get(), POLLIN, static_cast<int>(timeout.count()));
    ended_ = readable.ok() && *readable;
    return ended_;
  }
  const uint64_t deadline = monotonicNs() + static_cast<uint64_t>(timeout.count()) * 1000000;
  for (;;) {
    if (probeEnded()) {
      ended_ = true;
      return true;
    }
    const uint64_t now = monotonicNs();
    if (now >= deadline) {
      return false;
    }
    const uint64_t stepNs = std::min<uint64_t>(deadline - now, 5000000);
    ::usleep(static_cast<useconds_t>(stepNs / 1000));
  }
}

bool RankProcess::signal(int sig) {
  if (ended()) {
    return false;
  }
#ifdef SYS_pidfd_send_signal
  if (pidfd_.valid()) {
    return ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) == 0;
  }
#endif
  return ::kill(pid_, sig) == 0;
}

}  // namespace resilient::restart::monitor
