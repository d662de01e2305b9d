// The CUDA health check (the reference's CudaHealthCheck): the device drains
// its queue within a timeout and its context is not corrupted.
#include <array>
#include <string>

#include "common/dl/cuda_runtime.h"
#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/health_checks/gpu_device.h"
#include "restart/hooks/bounded_call.h"

namespace resilient::restart {

bool cudaAvailable() noexcept {
  try {
    std::string why;
    const dl::CudaRuntime* rt = dl::openCudaRuntime(&why);
    int count = 0;
    return rt != nullptr && rt->getDeviceCount(&count) == dl::kCudaSuccess && count > 0;
  } catch (...) {
    return false;
  }
}

std::string cudaDevicePciBusId(int device) {
  std::string why;
  const dl::CudaRuntime* rt = dl::openCudaRuntime(&why);
  if (rt == nullptr) {
    return {};
  }
  int chosen = 0;
  try {
    chosen = detail::chooseCudaDevice(*rt, device);
  } catch (const HealthCheckError&) {
    return {};
  }
  std::array<char, 64> busId{};
  if (rt->deviceGetPCIBusId(busId.data(), static_cast<int>(busId.size()), chosen) !=
      dl::kCudaSuccess) {
    return {};
  }
  return std::string(busId.data());
}

HealthCheckFn cudaHealthCheck(std::optional<std::chrono::milliseconds> timeout, int device) {
  const std::chrono::milliseconds bound =
      timeout
          ? *timeout
          : std::chrono::milliseconds(config::Params::global().get<config::kHealthCudaTimeoutMs>());
  if (bound.count() <= 0) {
    throw ConfigError("cudaHealthCheck: the timeout must be positive, not " +
                      std::to_string(bound.count()) + " ms");
  }
  if (device < -1) {
    throw ConfigError(
        "cudaHealthCheck: device must be -1 (LOCAL_RANK or the current device) "
        "or a device index, not " +
        std::to_string(device));
  }
  return [bound, device](const State&) {
    std::string why;
    const dl::CudaRuntime* rt = dl::openCudaRuntime(&why);
    if (rt == nullptr) {
      throw HealthCheckError("CUDA health check: no usable CUDA runtime: " + why);
    }
    int dev = 0;
    try {
      dev = detail::chooseCudaDevice(*rt, device);
    } catch (const HealthCheckError& e) {
      throw HealthCheckError(std::string("CUDA health check: ") + e.what());
    }
    const std::string name = "CUDA device " + std::to_string(dev);
    // First: drain the queue on a thread of its own; a device that never
    // finishes leaves that thread blocked, not this one.
    detail::runBounded(bound, "CUDA health check: synchronize of " + name, "health-cuda",
                       [rt, dev, name] {
                         if (const auto err = rt->setDevice(dev); err != dl::kCudaSuccess) {
                           throw HealthCheckError("CUDA health check: cannot select " + name +
                                                  ": " + rt->describe(err));
                         }
                         if (const auto err = rt->deviceSynchronize(); err != dl::kCudaSuccess) {
                           throw HealthCheckError("CUDA health check: " + name +
                                                  " failed to synchronize: " + rt->describe(err));
                         }
                       });
    // Second, here: a context corrupted by a fault answers with its sticky
    // error at once. The calling thread's current device is restored.
    int previous = -1;
    if (rt->getDevice(&previous) != dl::kCudaSuccess) {
      previous = -1;
    }
    dl::CudaStatus err = rt->setDevice(dev);
    if (err == dl::kCudaSuccess) {
      err = rt->deviceSynchronize();
    }
    if (previous >= 0 && previous != dev) {
      rt->setDevice(previous);
    }
    if (err != dl::kCudaSuccess) {
      // A sticky error stays with the context for the life of the process
      // (CUDA runtime API, "Error Handling": the process must terminate and
      // relaunch): only a new process can use the device again.
      throw RankNeedsNewProcess("CUDA health check: " + name +
                                " context is unusable: " + rt->describe(err) +
                                " (a sticky error: only a new process can use the device again)");
    }
  };
}

}  // namespace resilient::restart
