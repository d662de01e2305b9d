// The CUDA runtime of the process, reached through dlopen so that the restart
// library neither links CUDA nor needs it installed. Internal to the library
// (threadedFinalize() carries the caller's device to its thread; the CUDA
// health check synchronizes the device).
#pragma once

#include <string>

namespace resilient::restart::detail {

using CudaError = int;  // cudaError_t; 0 is cudaSuccess
inline constexpr CudaError kCudaSuccess = 0;

struct CudaRuntime {
  std::string library;  // the soname that answered, e.g. "libcudart.so.13"
  CudaError (*getDeviceCount)(int*) = nullptr;
  CudaError (*getDevice)(int*) = nullptr;
  CudaError (*setDevice)(int) = nullptr;
  CudaError (*deviceSynchronize)() = nullptr;
  CudaError (*getLastError)() = nullptr;
  CudaError (*deviceGetPCIBusId)(char*, int, int) = nullptr;
  const char* (*getErrorName)(CudaError) = nullptr;
  const char* (*getErrorString)(CudaError) = nullptr;

  // "cudaErrorNoDevice (100): no CUDA-capable device is detected".
  std::string describe(CudaError error) const;
};

// The runtime the process has already loaded (libcudart.so.13, .so.12 or .so,
// looked up with RTLD_NOLOAD), or nullptr: nothing is loaded by this call.
const CudaRuntime* loadedCudaRuntime() noexcept;

// The loaded runtime, else the first of those names that dlopen finds. On
// failure returns nullptr and sets *why. The library stays loaded for the
// life of the process (threads left blocked in it must never see it unmapped).
const CudaRuntime* openCudaRuntime(std::string* why);

}  // namespace resilient::restart::detail
