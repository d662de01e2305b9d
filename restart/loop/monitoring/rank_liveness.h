// The rank's end of its liveness link with its monitor process: a socket
// pair made before the monitor starts (the monitor inherits the other end,
// monitor/spawn.h) and a thread of this library that answers the monitor's
// handshake and heartbeats (net::liveness::StreamLink: the net plugin's
// liveness frames and rules). The monitor judges the silence: a rank that
// answers nothing for NCCL_RESILIENT_LIVENESS_TIMEOUT_MS is frozen
// (SIGSTOP, descheduled for good) whatever the job's topology or framework,
// and its monitor names it and kills it (restart/monitor/monitor.h). The
// thread takes no lock the application may hold (the GIL, NCCL's): a rank
// whose application is busy or blocked still answers, and is a stuck rank,
// not a frozen one. The rank's death is its monitor's pidfd's business.
//
// Threads: made, started and stopped by the loop's thread; the answering
// thread owns the link in between.
#pragma once

#include <thread>

#include "common/file_descriptor.h"

namespace resilient::restart {

class RankLiveness {
 public:
  // The socket pair (close-on-exec both). Throws RestartError.
  RankLiveness();
  ~RankLiveness();  // stop()
  RankLiveness(const RankLiveness&) = delete;
  RankLiveness& operator=(const RankLiveness&) = delete;

  // The end the monitor process inherits (valid until start()).
  int monitorEnd() const noexcept { return monitorEnd_.get(); }
  // The monitor has started with its end: closes it here and starts
  // answering. Throws RestartError.
  void start();
  // Says goodbye (the monitor stops judging the link; the rank's end is its
  // pidfd's) and joins the thread. Idempotent.
  void stop() noexcept;

 private:
  void run(int linkFd) noexcept;

  FileDescriptor rankEnd_;
  FileDescriptor monitorEnd_;
  FileDescriptor wake_;  // eventfd: stop()
  std::thread thread_;
};

}  // namespace resilient::restart
