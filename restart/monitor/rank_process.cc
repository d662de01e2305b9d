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

bool RankProcess::waitForEnd(std::chrono::milliseconds timeout, int wakeFd) {
  if (ended_) {
    return true;
  }
  if (pidfd_.valid()) {
    pollfd fds[2] = {{pidfd_.get(), POLLIN, 0}, {wakeFd, POLLIN, 0}};
    int n = 0;
    do {
      n = ::poll(fds, wakeFd >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
    } while (n < 0 && errno == EINTR);
    ended_ = n > 0 && (fds[0].revents & POLLIN) != 0;
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
    pollfd wake{wakeFd, POLLIN, 0};
    if (::poll(&wake, wakeFd >= 0 ? 1 : 0, static_cast<int>((stepNs + 999999) / 1000000)) > 0) {
      return false;
    }
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
