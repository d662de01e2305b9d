// threadedFinalize(): the function on its own thread, its exceptions
// propagated, an overrun reported as TimeoutError while the thread goes on
// safely with its own copy of the state.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/hooks.hpp"
#include "restart/hooks/bounded_call.h"

using namespace resilient::restart;
using namespace std::chrono_literals;

namespace {

// Polls `done` for up to 5 s.
bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("threadedFinalize runs the function on another thread", "[hooks][finalize]") {
  const auto caller = std::this_thread::get_id();
  std::thread::id ranOn;
  int iteration = -1;
  auto finalize = threadedFinalize(5s, [&](const State& s) {
    ranOn = std::this_thread::get_id();
    iteration = s.iteration;
  });
  State s;
  s.iteration = 4;
  finalize(s);
  CHECK(ranOn != caller);
  CHECK(ranOn != std::thread::id());
  CHECK(iteration == 4);
}

TEST_CASE("threadedFinalize propagates the function's exception", "[hooks][finalize]") {
  auto finalize = threadedFinalize(5s, [](const State&) { throw std::logic_error("bad buffer"); });
  CHECK_THROWS_AS(finalize(State{}), std::logic_error);
  CHECK_THROWS_WITH(finalize(State{}), "bad buffer");
}

TEST_CASE("threadedFinalize throws TimeoutError on an overrun and the thread ends later",
          "[hooks][finalize]") {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<int>>(-1);
  const int before = detail::overrunningThreads();
  {
    auto finalize = threadedFinalize(50ms, [release, finished](const State& s) {
      while (!release->load()) {
        std::this_thread::sleep_for(1ms);
      }
      finished->store(s.iteration);  // its own copy: the caller's State is gone by now
    });
    auto state = std::make_unique<State>();
    state->iteration = 9;
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(finalize(*state), TimeoutError);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    CHECK_THROWS_WITH(finalize(*state), Catch::Contains("finalize") && Catch::Contains("50 ms"));
    state.reset();
  }  // the hook itself is gone too
  CHECK(detail::overrunningThreads() == before + 2);
  release->store(true);
  CHECK(eventually([&] { return detail::overrunningThreads() == before; }));
  CHECK(finished->load() == 9);
}

TEST_CASE("threadedFinalize refuses a non-positive timeout or no function", "[hooks][finalize]") {
  CHECK_THROWS_AS(threadedFinalize(0ms, [](const State&) {}), ConfigError);
  CHECK_THROWS_WITH(threadedFinalize(-5ms, [](const State&) {}), Catch::Contains("-5 ms"));
  CHECK_THROWS_AS(threadedFinalize(1s, FinalizeFn{}), ConfigError);
}

TEST_CASE("runBounded names its thread", "[hooks][finalize]") {
  std::string name;
  detail::runBounded(1s, "probe", "restart-probe", [&] {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    name = buf;
  });
  CHECK(name == "restart-probe");
}
