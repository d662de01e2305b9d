// resilient-nettest's launcher: without RANK/WORLD_SIZE in its environment
// the tool starts its N ranks itself (tools/harness/launcher.h: the tool run
// again per rank, the rendezvous socket bound first, the start pipe, a job
// token), sends --kill/--stop, sets --fault in one rank's environment,
// collects each rank's result file and reports the run (report.h).
#pragma once

#include <string>
#include <vector>

#include "tools/harness/launcher.h"
#include "tools/nettest/config.h"

namespace resilient::nettest {

// Variables between the launcher and its ranks.
inline constexpr const char* kEnvToken = "RESILIENT_NETTEST_TOKEN";
inline constexpr const char* kEnvDir = "RESILIENT_NETTEST_DIR";  // where ranks write results
inline constexpr const char* kEnvListenFd = "RESILIENT_NETTEST_LISTEN_FD";
inline constexpr const char* kEnvStartFd = "RESILIENT_NETTEST_START_FD";
inline constexpr const char* kEnvFault = "NCCL_RESILIENT_FAULT";
inline constexpr harness::LaunchEnvNames kLaunchEnvNames{
    .token = kEnvToken, .listenFd = kEnvListenFd, .startFd = kEnvStartFd};

// The run's exit status (tools/common/host_tool.h).
int runLauncher(const Config& c, const harness::Environment& env,
                const std::vector<std::string>& argv);

}  // namespace resilient::nettest
