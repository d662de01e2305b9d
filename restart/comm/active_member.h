// A communicator's members are the iteration's active ranks: the check both
// stock communicators make before they build anything.
#pragma once

#include "resilient/restart/communicator.hpp"

namespace resilient::restart::comm {

// Throws InternalError naming `kind` ("host", "nccl") and the communicator
// unless this rank is active with a rank in [0, activeWorldSize).
void requireActiveMember(const CommunicatorSetup& setup, const char* kind);

}  // namespace resilient::restart::comm
