// A test binary that must skip when RESILIENT_TEST_FORCE_SKIP is set: proves
// that the shared main turns a failed precondition into exit code 77.
#include <cstdlib>

#include <catch2/catch.hpp>

#include "tests/support/skip.h"

namespace {

const resilient::test::Precondition kForcedSkip{[] {
  const char* v = std::getenv(
      "RESILIENT_TEST_FORCE_SKIP");  // NOLINT(concurrency-mt-unsafe): single-threaded main
  return v != nullptr ? std::string("RESILIENT_TEST_FORCE_SKIP is set") : std::string();
}};

}  // namespace

TEST_CASE("the skip probe runs when no precondition fails", "[support]") {
  SUCCEED();
}
