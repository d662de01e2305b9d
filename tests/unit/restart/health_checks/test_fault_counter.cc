// faultCounter(): iterations in which this rank faulted, counted once each.
#include <stdexcept>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"

using namespace resilient::restart;

namespace {

State faulted(int iteration) {
  State s;
  s.iteration = iteration;
  s.fnException = std::make_exception_ptr(std::runtime_error("boom"));
  return s;
}

State clean(int iteration) {
  State s;
  s.iteration = iteration;
  return s;
}

}  // namespace

TEST_CASE("the fault counter throws past maxRankFaults", "[health][faults]") {
  auto counter = faultCounter(2);
  CHECK_NOTHROW(counter(clean(0)));
  CHECK_NOTHROW(counter(faulted(1)));
  CHECK_NOTHROW(counter(clean(2)));
  CHECK_NOTHROW(counter(faulted(3)));
  CHECK_THROWS_AS(counter(faulted(4)), FaultCounterExceeded);
  CHECK_THROWS_AS(counter(faulted(5)), HealthCheckError);  // a FaultCounterExceeded is one
}

TEST_CASE("a culprit counts as a fault", "[health][faults]") {
  auto counter = faultCounter(0);
  State s = clean(1);
  s.culprit = true;
  s.initialRank = 6;
  CHECK_THROWS_WITH(counter(s), Catch::Contains("initial rank 6") &&
                                    Catch::Contains("maxRankFaults 0") &&
                                    Catch::Contains("culprit"));
}

TEST_CASE("one iteration counts once however often it is checked", "[health][faults]") {
  auto counter = faultCounter(1);
  CHECK_NOTHROW(counter(faulted(1)));
  CHECK_NOTHROW(counter(faulted(1)));
  CHECK_THROWS_AS(counter(faulted(2)), FaultCounterExceeded);
}

TEST_CASE("copies of a fault counter share the tally", "[health][faults]") {
  auto counter = faultCounter(1);
  auto copy = counter;
  CHECK_NOTHROW(counter(faulted(1)));
  CHECK_THROWS_AS(copy(faulted(2)), FaultCounterExceeded);
}

TEST_CASE("a negative limit is a configuration error", "[health][faults]") {
  CHECK_THROWS_AS(faultCounter(-1), ConfigError);
}
