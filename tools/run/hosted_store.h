// The job's TCP store as the agent of node 0 serves it (resilient-run
// --host-store): a resilient-store process of its own, restarted at once on
// the same address when it ends while the job runs. A restarted store is
// empty; the ranks' and monitors' clients follow it and put back what they
// keep there (restart/loop/store_restarts.h), so that losing the store while
// no restart is in progress costs no training step. docs/restart.md, "The
// agent".
#pragma once

#include <sys/types.h>

#include <string>

namespace resilient::run {

class HostedStore {
 public:
  // `listen`: HOST:PORT (port 0: one the kernel picks, kept across restarts);
  // `logPath`: the store's output (empty: the agent's stderr).
  HostedStore(std::string listen, std::string logPath);
  ~HostedStore();  // stop()
  HostedStore(const HostedStore&) = delete;
  HostedStore& operator=(const HostedStore&) = delete;

  // Starts the server and waits for it to serve; throws std::runtime_error.
  void start();
  // tcp://HOST:PORT of the running server.
  const std::string& url() const noexcept { return url_; }
  pid_t pid() const noexcept { return pid_; }
  // The server process ended with `status` (waitpid's): starts it again on the
  // same address. Throws std::runtime_error when it cannot.
  void restart(int status);
  int restarts() const noexcept { return restarts_; }
  // SIGTERM, then waits for it (reaped here).
  void stop();

 private:
  std::string listen_;
  std::string logPath_;
  std::string url_;
  pid_t pid_ = 0;
  int restarts_ = 0;
};

// The resilient-store program beside this one (installed side by side; in a
// build tree tools/store/), else "resilient-store" on PATH.
std::string storeProgram();

}  // namespace resilient::run
