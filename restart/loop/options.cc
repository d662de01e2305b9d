// Options::fromEnvironment() and Options::validate() (options.hpp).
#include "resilient/restart/options.hpp"

#include <string>

#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "restart/loop/options_from.h"

namespace resilient::restart {

Options Options::fromEnvironment() {
  return optionsFrom(config::Params::global());
}

std::string blackboxDirOf(const Options& options, const config::Params& params) {
  return options.blackboxDir.empty() ? std::string(params.get<config::kBlackboxDir>())
                                     : options.blackboxDir;
}

Options optionsFrom(const config::Params& p) {
  Options o;
  o.storeUrl = p.get<config::kStoreUrl>();
  o.jobId = p.get<config::kRestartJob>();
  o.enabled = p.get<config::kRestartEnabled>();
  o.useMonitorProcess = p.get<config::kRestartMonitorProcess>();
  o.terminateCulprits = p.get<config::kRestartTerminateCulprits>();
  o.automaticHealthChecks = p.get<config::kRestartAutoHealthChecks>();
  o.blackboxDir = p.get<config::kBlackboxDir>();
  o.monitorThreadInterval = Millis(p.get<config::kRestartMonitorThreadIntervalMs>());
  o.monitorProcessInterval = Millis(p.get<config::kRestartMonitorProcessIntervalMs>());
  o.heartbeatInterval = Millis(p.get<config::kRestartHeartbeatIntervalMs>());
  o.progressWatchdogInterval = Millis(p.get<config::kRestartProgressWatchdogIntervalMs>());
  o.softTimeout = Millis(p.get<config::kRestartSoftTimeoutMs>());
  o.hardTimeout = Millis(p.get<config::kRestartHardTimeoutMs>());
  o.heartbeatTimeout = Millis(p.get<config::kRestartHeartbeatTimeoutMs>());
  o.barrierTimeout = Millis(p.get<config::kRestartBarrierTimeoutMs>());
  o.completionTimeout = Millis(p.get<config::kRestartCompletionTimeoutMs>());
  o.lastCallWait = Millis(p.get<config::kRestartLastCallWaitMs>());
  o.terminationGraceTime = Millis(p.get<config::kRestartTerminationGraceMs>());
  o.finalizeTimeout = Millis(p.get<config::kRestartFinalizeTimeoutMs>());
  o.healthCheckTimeout = Millis(p.get<config::kRestartHealthCheckTimeoutMs>());
  o.communicatorTimeout = Millis(p.get<config::kRestartCommunicatorTimeoutMs>());
  o.stormLimit = static_cast<int>(p.get<config::kRestartStormLimit>());
  o.stormWindow = Millis(p.get<config::kRestartStormWindowMs>());
  o.restartBackoff = Millis(p.get<config::kRestartBackoffMs>());
  o.restartBackoffMax = Millis(p.get<config::kRestartBackoffMaxMs>());
  o.healthInterval = Millis(p.get<config::kHealthIntervalMs>());
  o.slowLinkPercent = static_cast<int>(p.get<config::kSlowLinkPercent>());
  o.slowLinkWindow = Millis(p.get<config::kSlowLinkWindowMs>());
  o.slowLinkRestart = p.get<config::kSlowLinkAction>() == config::HealthAction::kRestart;
  o.stragglerLag = Millis(p.get<config::kStragglerLagMs>());
  o.stragglerWindow = Millis(p.get<config::kStragglerWindowMs>());
  o.stragglerRestart = p.get<config::kStragglerAction>() == config::HealthAction::kRestart;
  o.stuckRankTimeout = Millis(p.get<config::kStuckRankTimeoutMs>());
  o.stuckRankRestart = p.get<config::kStuckRankAction>() == config::HealthAction::kRestart;
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
  require(stormLimit >= 0, "stormLimit (" + std::to_string(stormLimit) + ") >= 0");
  require(stormWindow > zero, show("stormWindow", stormWindow) + " > 0");
  require(restartBackoff >= zero && restartBackoff <= restartBackoffMax,
          "0 <= " + show("restartBackoff", restartBackoff) +
              " <= " + show("restartBackoffMax", restartBackoffMax));
  require(terminationGraceTime >= zero,
          show("terminationGraceTime", terminationGraceTime) + " >= 0");
  require(healthInterval >= zero, show("healthInterval", healthInterval) + " >= 0");
  require(slowLinkPercent >= 1 && slowLinkPercent <= 99,
          "1 <= slowLinkPercent (" + std::to_string(slowLinkPercent) + ") <= 99");
  for (const auto& [name, value] :
       {std::pair{"slowLinkWindow", slowLinkWindow}, std::pair{"stragglerLag", stragglerLag},
        std::pair{"stragglerWindow", stragglerWindow},
        std::pair{"stuckRankTimeout", stuckRankTimeout}}) {
    require(value > zero, show(name, value) + " > 0");
  }
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
