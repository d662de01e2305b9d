// The stock initialize hook (the reference's RetryController): ends the job
// with RestartAbort once the iteration count or the world shrinks past a limit.
#include <optional>
#include <string>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/hooks.hpp"

namespace resilient::restart {

InitializeFn retryController(std::optional<int> maxIterations, int minWorldSize,
                             int minActiveWorldSize) {
  if (maxIterations && *maxIterations < 1) {
    throw ConfigError(
        "retryController: maxIterations must be at least 1 (or unset for no "
        "limit), not " +
        std::to_string(*maxIterations));
  }
  if (minWorldSize < 1) {
    throw ConfigError("retryController: minWorldSize must be at least 1, not " +
                      std::to_string(minWorldSize));
  }
  if (minActiveWorldSize < 1) {
    throw ConfigError("retryController: minActiveWorldSize must be at least 1, not " +
                      std::to_string(minActiveWorldSize));
  }
  return [maxIterations, minWorldSize, minActiveWorldSize](const State& state) {
    if (maxIterations && state.iteration >= *maxIterations) {
      throw RestartAbort("retry limit reached: iteration " + std::to_string(state.iteration) +
                         " reaches maxIterations " + std::to_string(*maxIterations) + " (" +
                         state.describe() + ")");
    }
    if (state.worldSize < minWorldSize) {
      throw RestartAbort("world too small: world size " + std::to_string(state.worldSize) +
                         " is below minWorldSize " + std::to_string(minWorldSize) + " (" +
                         state.describe() + ")");
    }
    if (state.activeWorldSize < minActiveWorldSize) {
      throw RestartAbort("too few active ranks: active world size " +
                         std::to_string(state.activeWorldSize) + " is below minActiveWorldSize " +
                         std::to_string(minActiveWorldSize) + " (" + state.describe() + ")");
    }
  };
}

}  // namespace resilient::restart
