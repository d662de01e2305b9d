// State::describe() and setDistributedEnvironment().
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "resilient/restart/state.hpp"

using namespace resilient::restart;

TEST_CASE("describe names iteration, ranks and role", "[hooks][state]") {
  State s;
  s.iteration = 3;
  s.rank = 2;
  s.worldSize = 7;
  s.initialRank = 4;
  s.initialWorldSize = 8;
  s.activeRank = 2;
  s.activeWorldSize = 6;
  s.mode = Mode::kActive;
  CHECK(s.describe() == "iteration 3: rank 2/7 (initial 4/8), active 2/6");
  s.mode = Mode::kInactive;
  s.activeRank = -1;
  CHECK(s.describe() == "iteration 3: rank 2/7 (initial 4/8), inactive (6 active)");
  s.mode = Mode::kTerminated;
  s.rank = -1;
  CHECK(s.describe() == "iteration 3: rank -1/7 (initial 4/8), terminated");
  CHECK(State{}.describe() == "iteration 0: rank 0/0 (initial 0/0), not assigned yet");
}

TEST_CASE("setDistributedEnvironment sets RANK and WORLD_SIZE and keeps LOCAL_RANK",
          "[hooks][state]") {
  ::setenv("RANK", "5", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  State s;
  s.rank = 3;
  s.worldSize = 6;
  setDistributedEnvironment(s);
  CHECK(std::string(std::getenv("RANK")) == "3");
  CHECK(std::string(std::getenv("WORLD_SIZE")) == "6");
  CHECK(std::string(std::getenv("LOCAL_RANK")) == "1");
  ::unsetenv("LOCAL_RANK");
  s.rank = 0;
  s.worldSize = 1;
  setDistributedEnvironment(s);
  CHECK(std::string(std::getenv("RANK")) == "0");
  CHECK(std::getenv("LOCAL_RANK") == nullptr);
}
