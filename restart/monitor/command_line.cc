#include "restart/monitor/command_line.h"

#include <CLI/CLI.hpp>

namespace resilient::restart::monitor {

namespace {

void addMillis(CLI::App& app, const char* name, Millis* target, const char* doc) {
  app.add_option_function<int64_t>(
         name, [target](int64_t v) { *target = Millis(v); }, doc)
      ->required()
      ->type_name("MS");
}

}  // namespace

MonitorConfig parseCommandLine(int argc, const char* const* argv) {
  MonitorConfig c;
  CLI::App app{
      "The monitor process of one rank of an nccl-resilient job: keeps the rank's heartbeat "
      "in the store, records the rank's death, enforces the soft and hard timeouts, watches "
      "the next rank's heartbeat, and dumps the rank's blackbox after a death.",
      "resilient-monitor"};
  app.add_option("--status-fd", c.statusFd, "descriptor of the rank's status page (inherited)")
      ->required();
  app.add_option("--liveness-fd", c.livenessFd,
                 "descriptor of the liveness link with the rank (inherited); default none");
  app.add_option("--store", c.storeUrl, "the job's store: tcp://host:port, etcd://..., memory")
      ->required();
  app.add_option("--job", c.jobId, "the job id (the store keys' prefix)")->required();
  app.add_option("--rank", c.rank, "the watched rank's initial rank")->required();
  app.add_option("--world-size", c.worldSize, "the job's initial world size")->required();
  addMillis(app, "--interval-ms", &c.interval, "how often the rank and the timeouts are checked");
  addMillis(app, "--heartbeat-interval-ms", &c.heartbeatInterval,
            "how often the rank's heartbeat is refreshed");
  addMillis(app, "--heartbeat-timeout-ms", &c.heartbeatTimeout,
            "a heartbeat not refreshed for this long is missing");
  addMillis(app, "--soft-timeout-ms", &c.softTimeout,
            "no progress for this long: cooperative restart");
  addMillis(app, "--hard-timeout-ms", &c.hardTimeout, "no progress for this long: kill the rank");
  addMillis(app, "--barrier-timeout-ms", &c.barrierTimeout,
            "the hard timeout while the rank waits in the iteration barrier");
  addMillis(app, "--grace-ms", &c.grace, "SIGTERM to SIGKILL");
  app.add_option_function<int64_t>(
         "--store-timeout-ms", [&c](int64_t v) { c.storeTimeout = Millis(v); },
         "the store may be unreachable this long (default NCCL_RESILIENT_STORE_TIMEOUT_MS)")
      ->type_name("MS");
  app.add_option("--log-file", c.logFile, "log file ({rank} is replaced); default stderr");
  app.add_option("--pid-file", c.pidFile, "file that receives the monitor's pid ({rank})");
  app.add_option("--blackbox-dir", c.blackboxDir,
                 "directory of the rank's blackbox (default NCCL_RESILIENT_BLACKBOX_DIR)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    throw CommandLineExit(0, app.help());
  } catch (const CLI::ParseError& e) {
    throw CommandLineExit(kBadArgumentsExit, e.what());
  }
  c.logFile = expandRankPlaceholder(c.logFile, c.rank);
  c.pidFile = expandRankPlaceholder(c.pidFile, c.rank);
  c.blackboxDir = expandRankPlaceholder(c.blackboxDir, c.rank);
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw CommandLineExit(kBadArgumentsExit, e.what());
  }
  return c;
}

}  // namespace resilient::restart::monitor
