// Helpers of the store tests: client options with short timeouts, running
// ranks as threads, child processes (the resilient-store binary).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/client_options.h"

namespace resilient::test {

// Short default timeouts so that a broken test fails in seconds, not minutes.
store::ClientOptions testClientOptions();

// Runs fn(i) on n threads and joins them; rethrows the first exception.
void runThreads(int n, const std::function<void(int)>& fn);

// Catch2's assertions are not thread-safe: threads note what they expect
// here and the test thread asserts on failures() once they are joined.
class Expectations {
 public:
  // Notes `what` as failed unless `ok`; returns `ok`.
  bool expect(bool ok, const std::string& what);
  std::vector<std::string> failures() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> failures_;
};

// A child process (fork + exec), killed with SIGKILL on destruction unless it
// was reaped, and when the test process dies (PR_SET_PDEATHSIG; that is tied
// to the spawning thread, so spawn from a thread that outlives the child).
class ChildProcess {
 public:
  // Runs `argv` (argv[0] a path) with stdout to a pipe (read with readLine)
  // and stderr inherited.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // A line of the child's stdout, or "" at EOF / after `timeout`.
  std::string readLine(std::chrono::milliseconds timeout);
  void kill(int sig);
  // Waits for the exit; returns the exit status (128+signal when killed), -1 on timeout.
  int wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffered_;
  bool reaped_ = false;
};

// The built resilient-store binary (RESILIENT_STORE_BIN, set by meson).
std::string storeBinary();

// Starts `resilient-store --listen 127.0.0.1:0 --token TOKEN` and waits for
// its "serving" line; *port receives the port it serves.
std::unique_ptr<ChildProcess> spawnStoreServer(const std::string& token, uint16_t* port);

}  // namespace resilient::test
