// Options::validate(): the reference's ordering rules, named in the error.
#include <catch2/catch.hpp>

#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/options.hpp"
#include "restart/loop/options_from.h"

using namespace resilient::restart;
using std::chrono::milliseconds;

TEST_CASE("the default options are valid", "[restart][options]") {
  CHECK_NOTHROW(Options{}.validate());
}

TEST_CASE("broken ordering rules are refused, naming the rule", "[restart][options]") {
  Options o;
  SECTION("soft < hard") {
    o.softTimeout = milliseconds(90000);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains("softTimeout (90000 ms) < hardTimeout"));
  }
  SECTION("hard < barrier") {
    o.hardTimeout = milliseconds(200000);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains("hardTimeout (200000 ms) < barrierTimeout"));
  }
  SECTION("heartbeat interval < heartbeat timeout") {
    o.heartbeatInterval = milliseconds(30000);
    CHECK_THROWS_WITH(o.validate(),
                      Catch::Contains("heartbeatInterval (30000 ms) < heartbeatTimeout"));
  }
  SECTION("monitor process interval < soft timeout") {
    o.softTimeout = milliseconds(20000);
    o.monitorProcessInterval = milliseconds(25000);
    CHECK_THROWS_WITH(o.validate(),
                      Catch::Contains("monitorProcessInterval (25000 ms) < softTimeout"));
  }
  SECTION("progress watchdog interval < soft timeout") {
    o.progressWatchdogInterval = milliseconds(70000);
    CHECK_THROWS_AS(o.validate(), ConfigError);
  }
  SECTION("positive timeouts") {
    o.finalizeTimeout = milliseconds(0);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains("finalizeTimeout (0 ms) > 0"));
  }
  SECTION("job id without a slash") {
    o.jobId = "a/b";
    CHECK_THROWS_AS(o.validate(), ConfigError);
  }
  SECTION("unique communicator names") {
    const CommunicatorFactory f = [](const CommunicatorSetup&) -> CommunicatorPtr {
      return nullptr;
    };
    o.communicators = {{"dp", f}, {"dp", f}};
    CHECK_THROWS_WITH(o.validate(), Catch::Contains("two communicators are named \"dp\""));
  }
}

TEST_CASE("every option's default is its knob's default", "[restart][options]") {
  // One option lives in the knob registry (common/knobs.h) and in Options'
  // member initialisers (options.hpp): a default changed in one place only
  // (the stuck-rank timeout nearly was) makes a job configured by nothing
  // behave unlike one configured by the environment with the same values.
  const char* const empty[] = {nullptr};
  const resilient::config::Params params(
      resilient::config::registry(),
      resilient::config::ConfigSources::fromEnvironment(empty, "", "/nonexistent/nccl.conf"));
  const Options k = optionsFrom(params);
  const Options d;
  CHECK(k.storeUrl == d.storeUrl);
  CHECK(k.jobId == d.jobId);
  CHECK(k.enabled == d.enabled);
  CHECK(k.useMonitorProcess == d.useMonitorProcess);
  CHECK(k.terminateCulprits == d.terminateCulprits);
  CHECK(k.automaticHealthChecks == d.automaticHealthChecks);
  // Empty in a C++ Options means the knob's directory, in effect the same.
  CHECK(blackboxDirOf(d, params) == k.blackboxDir);
  CHECK(blackboxDirOf(d, params) == "/dev/shm");
  CHECK(k.monitorThreadInterval == d.monitorThreadInterval);
  CHECK(k.monitorProcessInterval == d.monitorProcessInterval);
  CHECK(k.heartbeatInterval == d.heartbeatInterval);
  CHECK(k.progressWatchdogInterval == d.progressWatchdogInterval);
  CHECK(k.softTimeout == d.softTimeout);
  CHECK(k.hardTimeout == d.hardTimeout);
  CHECK(k.heartbeatTimeout == d.heartbeatTimeout);
  CHECK(k.barrierTimeout == d.barrierTimeout);
  CHECK(k.completionTimeout == d.completionTimeout);
  CHECK(k.lastCallWait == d.lastCallWait);
  CHECK(k.terminationGraceTime == d.terminationGraceTime);
  CHECK(k.finalizeTimeout == d.finalizeTimeout);
  CHECK(k.healthCheckTimeout == d.healthCheckTimeout);
  CHECK(k.communicatorTimeout == d.communicatorTimeout);
  CHECK(k.stormLimit == d.stormLimit);
  CHECK(k.stormWindow == d.stormWindow);
  CHECK(k.restartBackoff == d.restartBackoff);
  CHECK(k.restartBackoffMax == d.restartBackoffMax);
  CHECK(k.healthInterval == d.healthInterval);
  CHECK(k.slowLinkPercent == d.slowLinkPercent);
  CHECK(k.slowLinkWindow == d.slowLinkWindow);
  CHECK(k.slowLinkRestart == d.slowLinkRestart);
  CHECK(k.stragglerLag == d.stragglerLag);
  CHECK(k.stragglerWindow == d.stragglerWindow);
  CHECK(k.stragglerRestart == d.stragglerRestart);
  CHECK(k.stuckRankTimeout == d.stuckRankTimeout);
  CHECK(k.stuckRankRestart == d.stuckRankRestart);
}
