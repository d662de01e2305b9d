// State::describe() and the RANK / WORLD_SIZE environment of an iteration.
#include "resilient/restart/state.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "resilient/restart/errors.hpp"

namespace resilient::restart {

std::string State::describe() const {
  std::string out = "iteration " + std::to_string(iteration) + ": rank " + std::to_string(rank) +
                    "/" + std::to_string(worldSize) + " (initial " + std::to_string(initialRank) +
                    "/" + std::to_string(initialWorldSize) + ")";
  switch (mode) {
    case Mode::kActive:
      out += ", active " + std::to_string(activeRank) + "/" + std::to_string(activeWorldSize);
      break;
    case Mode::kInactive:
      out += ", inactive (" + std::to_string(activeWorldSize) + " active)";
      break;
    case Mode::kTerminated: out += ", terminated"; break;
    case Mode::kInitialized: out += ", not assigned yet"; break;
  }
  return out;
}

namespace {

void setVariable(const char* name, int value) {
  const std::string text = std::to_string(value);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): between iterations; see setDistributedEnvironment
  if (::setenv(name, text.c_str(), 1) != 0) {
    throw RestartError(std::string("cannot set ") + name + "=" + text + ": " +
                       std::error_code(errno, std::generic_category()).message());
  }
}

}  // namespace

// LOCAL_RANK is left as the launcher set it: a rank keeps its node and GPU
// across iterations, only its position in the world changes. setenv is not
// safe against concurrent getenv: the loop calls this between iterations,
// when no hook or wrapped function runs (docs/restart.md, "Hooks").
void setDistributedEnvironment(const State& state) {
  setVariable("RANK", state.rank);
  setVariable("WORLD_SIZE", state.worldSize);
}

}  // namespace resilient::restart
