#include "restart/monitor/rank_process.h"

#include <dirent.h>
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

// Fields of /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (proc(5)).
struct TaskStat {
  char state = 0;            // field 3
  unsigned long flags = 0;   // field 9: the kernel's PF_* flags
  uint64_t startTicks = 0;   // field 22: clock ticks since boot
};

// False when the file cannot be read (the process or thread does not exist).
bool readTaskStat(const std::string& path, TaskStat* out) {
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
  out->state = *p;
  for (int field = 3; field < 22 && p != nullptr; ++field) {
    p = std::strchr(p, ' ');
    if (p != nullptr) {
      ++p;
      if (field + 1 == 9) {
        out->flags = std::strtoul(p, nullptr, 10);
      }
    }
  }
  out->startTicks = p != nullptr ? std::strtoull(p, nullptr, 10) : 0;
  return true;
}

std::string statPath(pid_t pid) {
  return "/proc/" + std::to_string(pid) + "/stat";
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
    TaskStat t;
    if (!readTaskStat(statPath(pid), &t) || t.state == 'Z' || t.state == 'X') {
      ended_ = true;
    }
    startTicks_ = t.startTicks;
  }
}

bool RankProcess::exiting(pid_t pid) {
  // include/linux/sched.h: PF_EXITING (do_exit, exit_signals) and PF_SIGNALED
  // (get_signal, a fatal signal); /proc/<pid>/task/<tid>/stat field 9.
  constexpr unsigned long kExiting = 0x00000004;
  constexpr unsigned long kSignaled = 0x00000400;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = ::opendir(dir.c_str());
  if (tasks == nullptr) {
    return false;  // gone: ended(), not exiting()
  }
  int seen = 0;
  bool all = true;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') {
      continue;
    }
    TaskStat t;
    if (!readTaskStat(dir + "/" + e->d_name + "/stat", &t)) {
      continue;  // this thread is gone meanwhile
    }
    ++seen;
    if (t.state != 'Z' && t.state != 'X' && (t.flags & (kExiting | kSignaled)) == 0) {
      all = false;
      break;
    }
  }
  ::closedir(tasks);
  return seen > 0 && all;
}

bool RankProcess::probeEnded() {
  TaskStat t;
  if (!readTaskStat(statPath(pid_), &t)) {
    return true;
  }
  return t.state == 'Z' || t.state == 'X' || t.startTicks != startTicks_;
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
