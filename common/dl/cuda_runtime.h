// The CUDA runtime (libcudart), reached through dlopen: nothing that uses it
// links CUDA or includes a CUDA header, so it builds and runs where CUDA is
// absent. The one loader of the restart library (the CUDA health check, the
// GPU check's PCI mapping, threadedFinalize carrying the caller's device) and
// the demo's --nccl mode; the table holds the calls those need, with CUDA's
// own signatures and values.
#pragma once

#include <array>
#include <cstddef>
#include <string>

// cudaStream_t is `struct CUstream_st*`.
struct CUstream_st;

namespace resilient::dl {

using CudaStatus = int;  // cudaError_t
inline constexpr CudaStatus kCudaSuccess = 0;
inline constexpr CudaStatus kCudaErrorNotReady = 600;  // cudaStreamQuery: work pending
using CudaStream = CUstream_st*;
inline constexpr unsigned kCudaStreamNonBlocking = 0x01;
// cudaMemcpyKind
inline constexpr int kCudaMemcpyHostToDevice = 1;
inline constexpr int kCudaMemcpyDeviceToHost = 2;

// The runtimes looked for without an explicit library, newest first: a
// process built against CUDA 13 has libcudart.so.13 loaded.
inline constexpr std::array<const char*, 3> kCudaRuntimeNames = {"libcudart.so.13",
                                                                 "libcudart.so.12", "libcudart.so"};

struct CudaRuntime {
  std::string library;  // the name dlopen was given ("libcudart.so.13", or an explicit path)
  // Devices.
  CudaStatus (*getDeviceCount)(int*) = nullptr;
  CudaStatus (*getDevice)(int*) = nullptr;
  CudaStatus (*setDevice)(int) = nullptr;
  CudaStatus (*deviceSynchronize)() = nullptr;
  CudaStatus (*deviceGetPCIBusId)(char*, int, int) = nullptr;
  // Memory and streams.
  CudaStatus (*mallocDevice)(void**, size_t) = nullptr;
  CudaStatus (*freeDevice)(void*) = nullptr;
  CudaStatus (*mallocHost)(void**, size_t) = nullptr;
  CudaStatus (*freeHost)(void*) = nullptr;
  CudaStatus (*memcpyAsync)(void*, const void*, size_t, int, CudaStream) = nullptr;
  CudaStatus (*streamCreateWithFlags)(CudaStream*, unsigned) = nullptr;
  CudaStatus (*streamDestroy)(CudaStream) = nullptr;
  CudaStatus (*streamQuery)(CudaStream) = nullptr;
  // Errors.
  const char* (*getErrorName)(CudaStatus) = nullptr;
  const char* (*getErrorString)(CudaStatus) = nullptr;

  // "cudaErrorNoDevice (100): no CUDA-capable device is detected"
  std::string describe(CudaStatus status) const;
};

// The runtime the process has already loaded (the first of
// kCudaRuntimeNames found with RTLD_NOLOAD that has every call), or nullptr:
// nothing is loaded by this call.
const CudaRuntime* loadedCudaRuntime() noexcept;

// With `library` empty: the loaded runtime, else the first of
// kCudaRuntimeNames that dlopen opens and that has every call. Otherwise
// exactly `library` (a soname or a path, given to dlopen as it is). On
// failure returns nullptr and sets *why to every candidate tried and why it
// failed ("libcudart.so.13 could not be loaded: <dlerror>; libcudart.so.12
// has no cudaStreamQuery: not a usable CUDA runtime; ..."). A runtime, once
// opened, is never unloaded and the result stays valid for the life of the
// process (threads left blocked in it must never see it unmapped).
const CudaRuntime* openCudaRuntime(std::string* why, const std::string& library = {});

}  // namespace resilient::dl
