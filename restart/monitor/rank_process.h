// The watched rank's process, which is not the monitor's child (the monitor
// is double-forked): its end is seen through a pidfd (poll wakes at once)
// or, on kernels without pidfd_open, by probing the pid every few
// milliseconds (a zombie counts as ended; the process's start time guards
// against a reused pid). Signals go through the pidfd when there is one.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

#include "common/file_descriptor.h"

namespace resilient::restart::monitor {

class RankProcess {
 public:
  enum class Watch { kAuto, kProbe };  // kProbe: the fallback, even where pidfds work (tests)
  explicit RankProcess(pid_t pid, Watch watch = Watch::kAuto);

  pid_t pid() const noexcept { return pid_; }
  bool usesPidfd() const noexcept { return pidfd_.valid(); }

  // True once the process has ended (exited or killed; reaped or not).
  bool ended();
  // True while the process is on its way out but has not ended: every thread
  // left is in the kernel's exit path (PF_EXITING) or was killed by a fatal
  // signal (PF_SIGNALED), so it runs none of its own code again, while the
  // kernel still tears it down (its sockets open, its pidfd not readable).
  // That can take a second: a SIGKILLed rank waited 1.05 s in its address
  // space's teardown for a file's i_mmap lock held by a CPU-starved kdamond.
  // Reads /proc only (callable from any thread). A stopped (SIGSTOP) or
  // frozen process is not exiting.
  static bool exiting(pid_t pid);
  // Waits up to `timeout` for the end; true once ended. Returns early (false)
  // when `wakeFd` (>= 0) turns readable.
  bool waitForEnd(std::chrono::milliseconds timeout, int wakeFd = -1);
  // Sends `sig`; false when the process is gone.
  bool signal(int sig);

 private:
  bool probeEnded();
  pid_t pid_;
  resilient::FileDescriptor pidfd_;
  uint64_t startTicks_ = 0;  // /proc/<pid>/stat field 22 (fallback only)
  bool ended_ = false;
};

}  // namespace resilient::restart::monitor
