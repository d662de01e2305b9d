#include "restart/health_checks/gpu_device.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::detail {

std::optional<int> localRankFromEnvironment() {
  const char* text = std::getenv("LOCAL_RANK");
  if (text == nullptr) {
    return std::nullopt;
  }
  const std::string_view view(text);
  int value = -1;
  const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (ec != std::errc() || end != view.data() + view.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

int chooseCudaDevice(const dl::CudaRuntime& rt, int requested) {
  int count = 0;
  if (const dl::CudaStatus err = rt.getDeviceCount(&count); err != dl::kCudaSuccess) {
    throw HealthCheckError("no usable CUDA device (" + rt.library + "): " + rt.describe(err));
  }
  if (count <= 0) {
    throw HealthCheckError("no CUDA device (" + rt.library + " reports none)");
  }
  if (requested >= 0) {
    if (requested >= count) {
      throw HealthCheckError("CUDA device " + std::to_string(requested) + " does not exist (" +
                             std::to_string(count) + " visible)");
    }
    return requested;
  }
  if (const auto local = localRankFromEnvironment(); local && *local < count) {
    return *local;
  }
  int current = 0;
  if (const dl::CudaStatus err = rt.getDevice(&current); err != dl::kCudaSuccess) {
    throw HealthCheckError("cannot read the current CUDA device: " + rt.describe(err));
  }
  return current;
}

}  // namespace resilient::restart::detail
