// The launcher's option syntax and environment merging.
#include <algorithm>

#include "tools/harness/launcher.h"

namespace harness = resilient::harness;

TEST_CASE("RANK@MS and RANK:SPEC parse strictly", "[hostengine][launcher]") {
  auto k = harness::parseTimedSignal("2@500");
  REQUIRE(k.ok());
  CHECK(k->rank == 2);
  CHECK(k->atMs == 500);
  for (const char* bad : {"", "2", "@5", "2@", "a@5", "2@x", "-1@5", "2@-5", "2@5ms", "2@@5"}) {
    CAPTURE(bad);
    CHECK_FALSE(harness::parseTimedSignal(bad).ok());
  }
  auto f = harness::parseRankFault("1:kind=stall,after=10");
  REQUIRE(f.ok());
  CHECK(f->rank == 1);
  CHECK(f->spec == "kind=stall,after=10");
  for (const char* bad : {"", "1", "1:", ":kind=stall", "x:kind=stall"}) {
    CAPTURE(bad);
    CHECK_FALSE(harness::parseRankFault(bad).ok());
  }
}

TEST_CASE("overrides replace inherited variables", "[hostengine][launcher]") {
  const harness::EnvironmentList base{{"PATH", "/bin"}, {"RANK", "9"}, {"HOME", "/root"}};
  const auto env = harness::mergeEnvironment(base, {{"RANK", "0"}, {"WORLD_SIZE", "4"}});
  CHECK(std::count(env.begin(), env.end(), "RANK=0") == 1);
  CHECK(std::count(env.begin(), env.end(), "RANK=9") == 0);
  CHECK(std::count(env.begin(), env.end(), "WORLD_SIZE=4") == 1);
  CHECK(std::count(env.begin(), env.end(), "PATH=/bin") == 1);
  CHECK(env.size() == 4);
}
