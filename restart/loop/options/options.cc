// Options::fromEnvironment() and Options::validate() (options.hpp).
#include "resilient/restart/options.hpp"

#include <string>
#include <type_traits>

#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "restart/loop/options/option_list.h"
#include "restart/loop/options/options_from.h"

namespace resilient::restart {

Options Options::fromEnvironment() {
  return optionsFrom(config::Params::global());
}

std::string blackboxDirOf(const Options& options, const config::Params& params) {
  return options.blackboxDir.empty() ? std::string(params.get<config::kBlackboxDir>())
                                     : options.blackboxDir;
}

// Each name is its id and its field in snake case, "_ms" exactly for a duration.
#define RESILIENT_CHECK_OPTION(ID, name, member, knob)                                           \
  static_assert(isNameOfId(#ID, name), "option " name ": its name is not its id's");             \
  static_assert(isNameOfField(#member, name, std::is_same_v<decltype(Options::member), Millis>), \
                "option " name ": its name is not its field's");
#define RESILIENT_CHECK_POLICY(ID, name, member)                              \
  static_assert(isNameOfId(#ID, name) && isNameOfField(#member, name, false), \
                "option " name ": its name is not its id's and its field's");
RESILIENT_RESTART_OPTIONS(RESILIENT_CHECK_OPTION, RESILIENT_CHECK_POLICY)
#undef RESILIENT_CHECK_OPTION
#undef RESILIENT_CHECK_POLICY

Options optionsFrom(const config::Params& p) {
  Options o;
#define RESILIENT_READ_OPTION(ID, name, member, knob) readKnob<knob>(o.member, p);
#define RESILIENT_NO_POLICY(ID, name, member)
  RESILIENT_RESTART_OPTIONS(RESILIENT_READ_OPTION, RESILIENT_NO_POLICY)
#undef RESILIENT_READ_OPTION
#undef RESILIENT_NO_POLICY
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
