// retryController(): the limits of the reference's RetryController and the
// validation of its arguments.
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/hooks.hpp"

using namespace resilient::restart;

namespace {

State stateAt(int iteration, int worldSize, int activeWorldSize) {
  State s;
  s.iteration = iteration;
  s.worldSize = worldSize;
  s.activeWorldSize = activeWorldSize;
  s.initialWorldSize = 8;
  s.mode = Mode::kActive;
  return s;
}

}  // namespace

TEST_CASE("retryController aborts once the iteration reaches maxIterations", "[hooks][retry]") {
  const auto retry = retryController(3);
  CHECK_NOTHROW(retry(stateAt(0, 8, 8)));
  CHECK_NOTHROW(retry(stateAt(2, 8, 8)));
  CHECK_THROWS_AS(retry(stateAt(3, 8, 8)), RestartAbort);
  CHECK_THROWS_WITH(retry(stateAt(4, 8, 8)),
                    Catch::Contains("maxIterations 3") && Catch::Contains("iteration 4"));
}

TEST_CASE("retryController without maxIterations never stops on the count", "[hooks][retry]") {
  const auto retry = retryController();
  CHECK_NOTHROW(retry(stateAt(1000000, 1, 1)));
}

TEST_CASE("retryController aborts below the minimum world sizes", "[hooks][retry]") {
  const auto retry = retryController(std::nullopt, 4, 3);
  CHECK_NOTHROW(retry(stateAt(5, 4, 3)));
  CHECK_THROWS_WITH(retry(stateAt(5, 3, 3)),
                    Catch::Contains("minWorldSize 4") && Catch::Contains("world size 3"));
  CHECK_THROWS_WITH(retry(stateAt(5, 6, 2)), Catch::Contains("minActiveWorldSize 3") &&
                                                 Catch::Contains("active world size 2"));
  CHECK_THROWS_AS(retry(stateAt(5, 6, 2)), RestartAbort);
}

TEST_CASE("retryController refuses limits that make no sense", "[hooks][retry]") {
  CHECK_THROWS_AS(retryController(0), ConfigError);
  CHECK_THROWS_WITH(retryController(-2), Catch::Contains("maxIterations") && Catch::Contains("-2"));
  CHECK_THROWS_WITH(retryController(std::nullopt, 0), Catch::Contains("minWorldSize"));
  CHECK_THROWS_WITH(retryController(std::nullopt, 1, -1), Catch::Contains("minActiveWorldSize"));
  CHECK_NOTHROW(retryController(1, 1, 1));
}
