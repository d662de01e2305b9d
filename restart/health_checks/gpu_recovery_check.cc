// The GPU recovery check (the reference's ChainedGPUHealthCheck and
// ChainedNVLHealthCheck): NVML's recovery action for the GPU and the state of
// its NVLink links.
#include <array>
#include <string>
#include <vector>

#include "common/dl/cuda_runtime.h"
#include "common/log.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/health_checks/gpu_device.h"
#include "restart/health_checks/gpu_recovery.h"
#include "restart/health_checks/nvml.h"

namespace resilient::restart {
namespace detail {

std::string recoveryActionName(uint64_t action) {
  switch (action) {
    case 0: return "NONE";
    case 1: return "GPU_RESET";
    case 2: return "NODE_REBOOT";
    case 3: return "DRAIN_P2P";
    case 4: return "DRAIN_AND_RESET";
    case 5: return "RECOVER_IMEX_DOMAIN";
    case 6: return "BUS_RESET";
    case 7: return "SYSTEM_REBOOT";
    default: return "action " + std::to_string(action);
  }
}

namespace {

bool absentOrUnsupported(NvmlReturn result) {
  return result == kNvmlErrorNotSupported || result == kNvmlErrorInvalidArgument;
}

void checkRecoveryAction(const NvmlApi& nvml, NvmlDevice device, const std::string& gpu) {
  NvmlFieldValue field{};
  field.fieldId = kNvmlFieldGpuRecoveryAction;
  const NvmlReturn call = nvml.getFieldValues(device, 1, &field);
  const NvmlReturn result = call != kNvmlSuccess ? call : field.nvmlReturn;
  if (absentOrUnsupported(result)) {
    RES_INFO(log::kRestart,
             "GPU health check: %s: the driver has no GPU recovery action field (%s); needs "
             "driver 570 or later",
             gpu.c_str(), nvml.describe(result).c_str());
    return;
  }
  if (result != kNvmlSuccess) {
    throw HealthCheckError("GPU health check: cannot read the recovery action of " + gpu + ": " +
                           nvml.describe(result));
  }
  // Every action but NONE means the GPU is unusable until it is done; the
  // reference lists GPU_RESET, NODE_REBOOT, DRAIN_P2P and DRAIN_AND_RESET,
  // newer drivers add more.
  const uint64_t action = fieldValueAsUnsigned(field);
  if (action == 0) {
    return;
  }
  const std::string what =
      "GPU health check: " + gpu + " needs recovery action " + recoveryActionName(action);
  // A reset (GPU_RESET, DRAIN_AND_RESET) needs every process off the GPU:
  // this one leaves so that its agent can start a new one after it (whose
  // own check tells whether the reset was done). The others need the node.
  if (action == 1 || action == 4) {
    throw RankNeedsNewProcess(what + " (this process leaves for a new one)");
  }
  throw HealthCheckError(what);
}

void checkNvLinks(const NvmlApi& nvml, NvmlDevice device, const std::string& gpu,
                  bool failOnNvLinkDown) {
  std::vector<unsigned> down;
  for (unsigned link = 0; link < kNvmlMaxNvLinks; ++link) {
    int state = 0;
    const NvmlReturn result = nvml.getNvLinkState(device, link, &state);
    if (absentOrUnsupported(result)) {
      continue;  // no such link, or no NVLink at all
    }
    if (result != kNvmlSuccess) {
      throw HealthCheckError("GPU health check: cannot read NVLink " + std::to_string(link) +
                             " of " + gpu + ": " + nvml.describe(result));
    }
    if (state != kNvmlFeatureEnabled) {
      down.push_back(link);
    }
  }
  if (down.empty()) {
    return;
  }
  std::string links;
  for (unsigned link : down) {
    links += (links.empty() ? "" : ",") + std::to_string(link);
  }
  const std::string message = gpu + ": NVLink " + links + " not active";
  if (failOnNvLinkDown) {
    throw HealthCheckError("GPU health check: " + message);
  }
  RES_WARN(log::kRestart,
           "GPU health check: %s (reported only; GpuRecoveryOptions::"
           "failOnNvLinkDown makes it fail)",
           message.c_str());
}

}  // namespace

void checkGpuRecovery(const NvmlApi& nvml, NvmlDevice device, const std::string& gpu,
                      bool failOnNvLinkDown) {
  checkRecoveryAction(nvml, device, gpu);
  checkNvLinks(nvml, device, gpu, failOnNvLinkDown);
}

}  // namespace detail

bool nvmlAvailable() noexcept {
  try {
    std::string why;
    return detail::openNvml(&why) != nullptr;
  } catch (...) {
    return false;
  }
}

namespace {

// NVML numbers GPUs its own way (all of them, PCI order); CUDA's index is
// mapped through the PCI bus id when the process uses the CUDA runtime.
detail::NvmlDevice nvmlDeviceFor(const detail::NvmlApi& nvml, int requested, std::string* gpu) {
  detail::NvmlDevice device = nullptr;
  if (const dl::CudaRuntime* rt = dl::loadedCudaRuntime()) {
    std::array<char, 64> busId{};
    int cudaDevice = -1;
    try {
      cudaDevice = detail::chooseCudaDevice(*rt, requested);
    } catch (const HealthCheckError&) {
      cudaDevice = -1;  // no device for CUDA: fall back to NVML's numbering
    }
    if (cudaDevice >= 0 && rt->deviceGetPCIBusId(busId.data(), static_cast<int>(busId.size()),
                                                 cudaDevice) == dl::kCudaSuccess) {
      *gpu =
          "GPU " + std::string(busId.data()) + " (CUDA device " + std::to_string(cudaDevice) + ")";
      if (const auto r = nvml.deviceByPciBusId(busId.data(), &device); r != detail::kNvmlSuccess) {
        throw HealthCheckError("GPU health check: NVML does not know " + *gpu + ": " +
                               nvml.describe(r));
      }
      return device;
    }
  }
  const int index = requested >= 0 ? requested : detail::localRankFromEnvironment().value_or(0);
  *gpu = "GPU " + std::to_string(index) + " (NVML index)";
  if (const auto r = nvml.deviceByIndex(static_cast<unsigned>(index), &device);
      r != detail::kNvmlSuccess) {
    throw HealthCheckError("GPU health check: no " + *gpu + ": " + nvml.describe(r));
  }
  return device;
}

}  // namespace

HealthCheckFn gpuRecoveryCheck(GpuRecoveryOptions options) {
  if (options.device < -1) {
    throw ConfigError(
        "gpuRecoveryCheck: device must be -1 (LOCAL_RANK or the current device) "
        "or a device index, not " +
        std::to_string(options.device));
  }
  return [options](const State&) {
    std::string why;
    const detail::NvmlApi* nvml = detail::openNvml(&why);
    if (nvml == nullptr) {
      throw HealthCheckError("GPU health check: " + why);
    }
    std::string gpu;
    const detail::NvmlDevice device = nvmlDeviceFor(*nvml, options.device, &gpu);
    detail::checkGpuRecovery(*nvml, device, gpu, options.failOnNvLinkDown);
  };
}

}  // namespace resilient::restart
