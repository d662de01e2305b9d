// composeX(): run order (last first), empty hooks skipped, the first
// exception stops the chain; composeAbort runs every abort.
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/hooks.hpp"

using namespace resilient::restart;

namespace {

// A hook that appends `name` to `trace`.
std::function<void(const State&)> recorder(std::vector<std::string>* trace, std::string name) {
  return [trace, name](const State&) { trace->push_back(name); };
}

std::function<void(const State&)> thrower(std::vector<std::string>* trace, std::string name) {
  return [trace, name](const State&) {
    trace->push_back(name);
    throw std::runtime_error(name + " failed");
  };
}

}  // namespace

TEMPLATE_TEST_CASE("a composed chain runs the last hook first and skips empty ones",
                   "[hooks][compose]", InitializeFn, FinalizeFn, HealthCheckFn) {
  std::vector<std::string> trace;
  std::vector<TestType> hooks = {recorder(&trace, "a"), TestType{}, recorder(&trace, "b"),
                                 recorder(&trace, "c")};
  TestType chain;
  if constexpr (std::is_same_v<TestType, InitializeFn>) {
    chain = composeInitialize(hooks);
  } else if constexpr (std::is_same_v<TestType, FinalizeFn>) {
    chain = composeFinalize(hooks);
  } else {
    chain = composeHealthChecks(hooks);
  }
  chain(State{});
  CHECK(trace == std::vector<std::string>{"c", "b", "a"});
}

TEST_CASE("completion and terminate chains keep the same order", "[hooks][compose]") {
  std::vector<std::string> trace;
  composeCompletion({recorder(&trace, "x"), recorder(&trace, "y")})(State{});
  composeTerminate({recorder(&trace, "p"), {}, recorder(&trace, "q")})(State{});
  CHECK(trace == std::vector<std::string>{"y", "x", "q", "p"});
}

TEST_CASE("the first exception stops a chain and propagates", "[hooks][compose]") {
  std::vector<std::string> trace;
  auto chain = composeHealthChecks(
      {recorder(&trace, "first-given"), thrower(&trace, "middle"), recorder(&trace, "last-given")});
  CHECK_THROWS_WITH(chain(State{}), "middle failed");
  CHECK(trace == std::vector<std::string>{"last-given", "middle"});
}

TEST_CASE("an empty or all-empty chain does nothing", "[hooks][compose]") {
  CHECK_NOTHROW(composeFinalize({})(State{}));
  CHECK_NOTHROW(composeInitialize({InitializeFn{}, InitializeFn{}})(State{}));
}

TEST_CASE("composeAbort runs every abort and rethrows the first exception",
          "[hooks][compose][abort]") {
  std::vector<std::string> trace;
  auto abort = composeAbort({recorder(&trace, "torch"), thrower(&trace, "second"),
                             recorder(&trace, "user"), thrower(&trace, "first")});
  CHECK_THROWS_WITH(abort(State{}), "first failed");
  CHECK(trace == std::vector<std::string>{"first", "user", "second", "torch"});
}

TEST_CASE("composeAbort keeps the exception's type", "[hooks][compose][abort]") {
  auto abort =
      composeAbort({[](const State&) { throw RestartAbort("stop"); }, [](const State&) {}});
  CHECK_THROWS_AS(abort(State{}), RestartAbort);
}

TEST_CASE("composed hooks see the state they are given", "[hooks][compose]") {
  int seen = -1;
  State s;
  s.iteration = 7;
  composeInitialize({[&](const State& st) { seen = st.iteration; }})(s);
  CHECK(seen == 7);
}
