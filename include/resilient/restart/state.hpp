// What a rank knows about itself in one iteration of the restart loop
// (docs/reference/restart-model.md §1.2, State / FrozenState / Mode). The loop owns the
// State; hooks receive it, the wrapped function reads it through its
// CallContext.
#pragma once

#include <exception>
#include <string>

#include "resilient/restart/visibility.h"
#include "resilient/restart/world.hpp"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

struct State {
  int initialRank = 0;       // the rank this process had when the job started
  int initialWorldSize = 0;  // ranks the job started with
  int rank = 0;              // rank in this iteration's world (-1 once terminated)
  int worldSize = 0;         // live ranks in this iteration
  int activeRank = -1;       // rank among the active ranks (-1 unless active)
  int activeWorldSize = 0;   // active ranks in this iteration
  int iteration = 0;         // 0 for the first call, +1 per restart
  Mode mode = Mode::kInitialized;
  // The exception that ended this rank's previous call of the wrapped
  // function (null if it did not throw, or on the first iteration).
  std::exception_ptr fnException;
  // The fault records of the previous iteration named this rank as the
  // culprit (the peer a liveness fault blamed, the rank behind in the
  // profiler's sequence numbers, a rank that died or hung).
  bool culprit = false;

  bool active() const noexcept { return mode == Mode::kActive; }
  // "iteration 3: rank 2/7 (initial 4/8), active 2/6".
  std::string describe() const;
};

// Sets RANK, WORLD_SIZE (this iteration's values) and keeps LOCAL_RANK, as
// launchers and frameworks read them; the loop calls it before every
// iteration (the reference's set_distributed_vars()).
void setDistributedEnvironment(const State& state);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
