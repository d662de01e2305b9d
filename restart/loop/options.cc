// Options::fromEnvironment() and Options::validate() (options.hpp).
#include "resilient/restart/options.hpp"

#include <string>

#include "common/params.h"
#include "resilient/restart/errors.hpp"

namespace resilient::restart {

Options Options::fromEnvironment() {
  using config::Param;
  const config::Params& p = config::Params::global();
  const auto ms = [&p](Param param) { return Millis(p.integer(param)); };
  Options o;
  o.storeUrl = p.string(Param::kStoreUrl);
  o.jobId = p.string(Param::kRestartJob);
  o.enabled = p.integer(Param::kRestartEnabled) != 0;
  o.useMonitorProcess = p.integer(Param::kRestartMonitorProcess) != 0;
  o.terminateCulprits = p.integer(Param::kRestartTerminateCulprits) != 0;
  o.automaticHealthChecks = p.integer(Param::kRestartAutoHealthChecks) != 0;
  o.blackboxDir = p.string(Param::kBlackboxDir);
  o.monitorThreadInterval = ms(Param::kRestartMonitorThreadIntervalMs);
  o.monitorProcessInterval = ms(Param::kRestartMonitorProcessIntervalMs);
  o.heartbeatInterval = ms(Param::kRestartHeartbeatIntervalMs);
  o.progressWatchdogInterval = ms(Param::kRestartProgressWatchdogIntervalMs);
  o.softTimeout = ms(Param::kRestartSoftTimeoutMs);
  o.hardTimeout = ms(Param::kRestartHardTimeoutMs);
  o.heartbeatTimeout = ms(Param::kRestartHeartbeatTimeoutMs);
  o.barrierTimeout = ms(Param::kRestartBarrierTimeoutMs);
  o.completionTimeout = ms(Param::kRestartCompletionTimeoutMs);
  o.lastCallWait = ms(Param::kRestartLastCallWaitMs);
  o.terminationGraceTime = ms(Param::kRestartTerminationGraceMs);
  o.finalizeTimeout = ms(Param::kRestartFinalizeTimeoutMs);
  o.healthCheckTimeout = ms(Param::kRestartHealthCheckTimeoutMs);
  o.communicatorTimeout = ms(Param::kRestartCommunicatorTimeoutMs);
  return o;
}

namespace {

void require(bool ok, const std::string& rule) {
  if (!ok) {
    throw ConfigError("restart options break the rule " + rule);
  }
}

std::string show(const char* name, Millis v) {
  return std::string(name) + " (" + std::to_string(v.count()) + " ms)";
}

}  // namespace

void Options::validate() const {
  const Millis zero{0};
  for (const auto& [name, value] :
       {std::pair{"monitorThreadInterval", monitorThreadInterval},
        std::pair{"monitorProcessInterval", monitorProcessInterval},
        std::pair{"heartbeatInterval", heartbeatInterval},
        std::pair{"progressWatchdogInterval", progressWatchdogInterval},
        std::pair{"softTimeout", softTimeout}, std::pair{"hardTimeout", hardTimeout},
        std::pair{"heartbeatTimeout", heartbeatTimeout},
        std::pair{"barrierTimeout", barrierTimeout},
        std::pair{"completionTimeout", completionTimeout},
        std::pair{"finalizeTimeout", finalizeTimeout},
        std::pair{"healthCheckTimeout", healthCheckTimeout},
        std::pair{"communicatorTimeout", communicatorTimeout}}) {
    require(value > zero, show(name, value) + " > 0");
  }
  require(lastCallWait >= zero, show("lastCallWait", lastCallWait) + " >= 0");
  require(terminationGraceTime >= zero,
          show("terminationGraceTime", terminationGraceTime) + " >= 0");
  // The reference's ordering rules (docs/reference/restart-model.md §1.2).
  require(softTimeout < hardTimeout,
          show("softTimeout", softTimeout) + " < " + show("hardTimeout", hardTimeout));
  require(hardTimeout < barrierTimeout,
          show("hardTimeout", hardTimeout) + " < " + show("barrierTimeout", barrierTimeout));
  for (const auto& [name, value] :
       {std::pair{"barrierTimeout", barrierTimeout},
        std::pair{"heartbeatTimeout", heartbeatTimeout}, std::pair{"softTimeout", softTimeout}}) {
    require(monitorProcessInterval < value,
            show("monitorProcessInterval", monitorProcessInterval) + " < " + show(name, value));
  }
  require(heartbeatInterval < heartbeatTimeout, show("heartbeatInterval", heartbeatInterval) +
                                                    " < " +
                                                    show("heartbeatTimeout", heartbeatTimeout));
  require(heartbeatTimeout < barrierTimeout, show("heartbeatTimeout", heartbeatTimeout) + " < " +
                                                 show("barrierTimeout", barrierTimeout));
  require(monitorThreadInterval < softTimeout,
          show("monitorThreadInterval", monitorThreadInterval) + " < " +
              show("softTimeout", softTimeout));
  require(progressWatchdogInterval < softTimeout,
          show("progressWatchdogInterval", progressWatchdogInterval) + " < " +
              show("softTimeout", softTimeout));
  if (jobId.empty() || jobId.find('/') != std::string::npos) {
    throw ConfigError("restart options: jobId \"" + jobId + "\" must be non-empty, without '/'");
  }
  if (!rankAssignment) {
    throw ConfigError("restart options: rankAssignment is empty");
  }
  for (size_t i = 0; i < communicators.size(); ++i) {
    if (communicators[i].first.empty() || !communicators[i].second) {
      throw ConfigError("restart options: communicator " + std::to_string(i) +
                        " needs a name and a factory");
    }
    for (size_t j = 0; j < i; ++j) {
      if (communicators[j].first == communicators[i].first) {
        throw ConfigError("restart options: two communicators are named \"" +
                          communicators[i].first + "\"");
      }
    }
  }
  if (rank >= 0 && worldSize >= 0 && rank >= worldSize) {
    throw ConfigError("restart options: rank " + std::to_string(rank) +
                      " is not within worldSize " + std::to_string(worldSize));
  }
}

}  // namespace resilient::restart
