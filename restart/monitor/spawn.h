// Starts the calling rank's monitor process (docs/reference/restart-model.md §1.1: a
// double-forked daemon that outlives its rank). The loop calls it before
// CUDA and NCCL initialise; between fork and exec nothing allocates (only
// async-signal-safe calls), so it is safe in a multi-threaded process.
//
// The monitor runs in its own session (setsid), is not the rank's child (its
// parent exits at once and init or the nearest subreaper adopts it),
// inherits the status page descriptor (config.statusFd) and its end of the
// liveness link (config.livenessFd, if any) and nothing else beyond
// stdin/stdout (both /dev/null) and stderr (the log file when one is
// given, so nothing holds the rank's pipes open); every signal is unblocked
// and at its default action.
#pragma once

#include <sys/types.h>

#include <string>

#include "restart/monitor/monitor_config.h"

namespace resilient::restart::monitor {

// Starts `resilient-monitor` (found by findMonitorExecutable(executable))
// with `config`'s arguments ("{rank}" in the paths expanded). Returns the
// monitor's pid once it has exec'd. Throws restart::ConfigError for a
// config that does not validate, restart::RestartError naming the step
// that failed otherwise (pipe, fork, exec of which path, ...).
pid_t spawnMonitor(const MonitorConfig& config, const std::string& executable = {});

}  // namespace resilient::restart::monitor
