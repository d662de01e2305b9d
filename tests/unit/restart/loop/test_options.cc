// Options::validate(): the reference's ordering rules, named in the error.
#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/options.hpp"

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
