// Which CUDA device a GPU health check looks at. Internal.
#pragma once

#include <optional>

#include "common/dl/cuda_runtime.h"

namespace resilient::restart::detail {

// LOCAL_RANK as a non-negative integer; nullopt when unset or not a number.
std::optional<int> localRankFromEnvironment();

// `requested` when >= 0; else LOCAL_RANK when set and below the device count
// (a launcher that hides the other GPUs with CUDA_VISIBLE_DEVICES leaves one
// device, whatever LOCAL_RANK says); else the calling thread's current
// device. Throws HealthCheckError when the runtime has no device or
// `requested` is out of range.
int chooseCudaDevice(const dl::CudaRuntime& rt, int requested);

}  // namespace resilient::restart::detail
