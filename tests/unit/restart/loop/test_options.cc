// Options::validate(): the reference's ordering rules, named in the error.
#include <string_view>

#include <catch2/catch.hpp>

#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/options.hpp"
#include "restart/loop/options/option_list.h"
#include "restart/loop/options/options_from.h"

using namespace resilient::restart;
namespace config = resilient::config;
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
  // One option's default lives in the knob registry (common/knobs.h) and in
  // Options' member initialisers (options.hpp): a default changed in one
  // place only (the stuck-rank timeout nearly was) makes a job configured by
  // nothing (C++) behave unlike one configured by the environment (the C API,
  // hence Python, and Options::fromEnvironment).
  const char* const empty[] = {nullptr};
  const resilient::config::Params params(
      resilient::config::registry(),
      resilient::config::ConfigSources::fromEnvironment(empty, "", "/nonexistent/nccl.conf"));
  const Options k = optionsFrom(params);
  const Options d;
  // Every option of the list (restart/loop/options/option_list.h) that has a knob.
  int compared = 0;
#define RESILIENT_COMPARE_DEFAULT(ID, name, member, knob)      \
  if constexpr (kHasKnob<knob>) {                              \
    INFO("option " name " and its knob " << knobName<knob>()); \
    if (std::string_view(name) == "blackbox_dir") {            \
      /* Empty in a C++ Options means the knob's directory. */ \
      CHECK(blackboxDirOf(d, params) == k.blackboxDir);        \
      CHECK(blackboxDirOf(d, params) == "/dev/shm");           \
    } else {                                                   \
      CHECK(k.member == d.member);                             \
    }                                                          \
    ++compared;                                                \
  }
#define RESILIENT_NO_POLICY(ID, name, member)
  RESILIENT_RESTART_OPTIONS(RESILIENT_COMPARE_DEFAULT, RESILIENT_NO_POLICY)
#undef RESILIENT_COMPARE_DEFAULT
#undef RESILIENT_NO_POLICY
  CHECK(compared == 33);  // the options with a knob (none skipped by the expansion)
}
