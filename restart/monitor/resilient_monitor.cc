// resilient-monitor: the monitor process of one rank (monitor.h). Started by
// the restart loop through spawn.h; docs/restart.md, "Monitor process".
//
// Exit codes: 0 the rank is done, or gone and recorded; 1 the monitor itself
// failed (its rank is left alone); 2 bad arguments.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "common/file_replace.h"
#include "common/params.h"
#include "restart/monitor/command_line.h"
#include "restart/monitor/monitor.h"
#include "restart/monitor/monitor_log.h"
#include "restart/protocol/status_page.h"
#include "store/client_options.h"
#include "store/lazy_store.h"

namespace rm = resilient::restart::monitor;

namespace {

// The pid file, removed when the monitor exits.
class PidFile {
 public:
  explicit PidFile(std::string path) : path_(std::move(path)) {
    if (path_.empty()) {
      return;
    }
    if (resilient::Status s = resilient::replaceFile(path_, std::to_string(::getpid()) + "\n");
        !s.ok()) {
      throw std::runtime_error("cannot write the pid file: " + s.toString());
    }
  }
  ~PidFile() {
    if (!path_.empty()) {
      ::unlink(path_.c_str());
    }
  }
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
};

int runMonitor(rm::MonitorConfig config) {
  std::unique_ptr<rm::MonitorLog> log;
  try {
    log = std::make_unique<rm::MonitorLog>(config.logFile, config.rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-monitor: %s\n", e.what());
    return rm::kMonitorExitFailed;
  }
  try {
    ::signal(SIGPIPE, SIG_IGN);
    const PidFile pidFile(config.pidFile);
    resilient::store::ClientOptions options = resilient::store::ClientOptions::fromParams();
    if (config.storeTimeout <= rm::Millis(0)) {
      config.storeTimeout = options.defaultTimeout;
    }
    options.defaultTimeout = config.storeTimeout;
    options.name = "monitor of rank " + std::to_string(config.rank) + " (" + options.name + ")";
    // A job store restarted by the agent that hosts it is taken: the
    // heartbeat puts itself back at its next beat.
    static std::atomic<uint64_t> storeRestarts{0};
    options.followRestarts = true;
    options.onServerRestart = [] { storeRestarts.fetch_add(1, std::memory_order_release); };
    if (config.blackboxDir.empty()) {
      config.blackboxDir =
          resilient::config::Params::global().get<resilient::config::kBlackboxDir>();
    }
    resilient::restart::protocol::StatusPageMapping page =
        resilient::restart::protocol::StatusPageMapping::attach(config.statusFd);
    // Opened by the first store call, not here: a store that does not
    // answer while the monitor starts must not keep it from watching.
    resilient::store::LazyStore store(config.storeUrl, options);
    rm::Monitor monitor(config, store, page.page(), *log, &storeRestarts);
    return monitor.run();
  } catch (const std::exception& e) {
    log->write("cannot start: %s", e.what());
    return rm::kMonitorExitFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  rm::MonitorConfig config;
  try {
    config = rm::parseCommandLine(argc, argv);
  } catch (const rm::CommandLineExit& e) {
    std::fprintf(e.exitCode() == 0 ? stdout : stderr, "%s%s\n",
                 e.exitCode() == 0 ? "" : "resilient-monitor: ", e.what());
    return e.exitCode();
  }
  return runMonitor(std::move(config));
}
