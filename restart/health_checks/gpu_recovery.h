// The GPU recovery check's decisions over an NvmlApi (tests pass a fake one).
// Internal.
#pragma once

#include <cstdint>
#include <string>

#include "restart/health_checks/nvml.h"

namespace resilient::restart::detail {

// "GPU_RESET", "NODE_REBOOT", ...; "NONE" for 0; "action N" when unknown.
std::string recoveryActionName(uint64_t action);

// Reads the recovery action and the NVLink states of `device` (named `gpu`
// in messages). Throws HealthCheckError when an action is required, when
// NVML cannot read the GPU, or, with failOnNvLinkDown, when a link is down;
// links down otherwise give one WARN.
void checkGpuRecovery(const NvmlApi& nvml, NvmlDevice device, const std::string& gpu,
                      bool failOnNvLinkDown);

}  // namespace resilient::restart::detail
