// The per-rank fault counter (the reference's FaultCounter).
#include <memory>
#include <mutex>
#include <string>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"

namespace resilient::restart {
namespace {

struct FaultTally {
  std::mutex mutex;
  int faults = 0;
  int lastCountedIteration = -1;  // an iteration is counted once, however often checked
};

}  // namespace

HealthCheckFn faultCounter(int maxRankFaults) {
  if (maxRankFaults < 0) {
    throw ConfigError("faultCounter: maxRankFaults must be 0 or more, not " +
                      std::to_string(maxRankFaults));
  }
  auto tally = std::make_shared<FaultTally>();
  return [tally, maxRankFaults](const State& state) {
    if (!state.fnException && !state.culprit) {
      return;
    }
    std::lock_guard<std::mutex> lock(tally->mutex);
    if (state.iteration == tally->lastCountedIteration) {
      return;
    }
    tally->lastCountedIteration = state.iteration;
    ++tally->faults;
    if (tally->faults > maxRankFaults) {
      throw FaultCounterExceeded(
          "fault counter: initial rank " + std::to_string(state.initialRank) + " faulted in " +
          std::to_string(tally->faults) + " iterations, more than maxRankFaults " +
          std::to_string(maxRankFaults) + " (latest: iteration " + std::to_string(state.iteration) +
          (state.culprit ? ", named as culprit" : "") + ")");
    }
  };
}

}  // namespace resilient::restart
