#include "restart/comm/active_member.h"

#include <string>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::comm {

void requireActiveMember(const CommunicatorSetup& setup, const char* kind) {
  const State& state = setup.state;
  if (state.activeRank < 0 || state.activeWorldSize < 1 ||
      state.activeRank >= state.activeWorldSize) {
    throw InternalError(std::string(kind) + " communicator '" + setup.name +
                        "': this rank is not active (rank " + std::to_string(state.activeRank) +
                        " of " + std::to_string(state.activeWorldSize) + " active)");
  }
}

}  // namespace resilient::restart::comm
