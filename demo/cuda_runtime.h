// The CUDA runtime of the demo's NCCL mode (--nccl), loaded at run time with
// dlopen: the demo includes no CUDA header and links no CUDA library, so it
// builds and runs in host-engine mode where CUDA is absent. Only the calls the
// GPU all-reduce needs are declared, with CUDA's own signatures and values.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

// cudaStream_t is `struct CUstream_st*`.
struct CUstream_st;

namespace resilient::demo {

using CudaStatus = int;  // cudaError_t
inline constexpr CudaStatus kCudaSuccess = 0;
inline constexpr CudaStatus kCudaErrorNotReady = 600;  // cudaStreamQuery: work pending
using CudaStream = CUstream_st*;
inline constexpr unsigned kCudaStreamNonBlocking = 0x01;
// cudaMemcpyKind
inline constexpr int kCudaMemcpyHostToDevice = 1;
inline constexpr int kCudaMemcpyDeviceToHost = 2;

// A CUDA call failed.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// --nccl cannot run here: no CUDA runtime, or no usable device. The message
// says which ("--nccl needs a CUDA device: cudaGetDeviceCount: ...").
class CudaUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CudaRuntime {
  std::string library;  // what dlopen was given ("libcudart.so.13", or --cuda-library's path)
  CudaStatus (*getDeviceCount)(int*) = nullptr;
  CudaStatus (*setDevice)(int) = nullptr;
  CudaStatus (*mallocDevice)(void**, size_t) = nullptr;
  CudaStatus (*freeDevice)(void*) = nullptr;
  CudaStatus (*mallocHost)(void**, size_t) = nullptr;
  CudaStatus (*freeHost)(void*) = nullptr;
  CudaStatus (*memcpyAsync)(void*, const void*, size_t, int, CudaStream) = nullptr;
  CudaStatus (*streamCreateWithFlags)(CudaStream*, unsigned) = nullptr;
  CudaStatus (*streamDestroy)(CudaStream) = nullptr;
  CudaStatus (*streamQuery)(CudaStream) = nullptr;
  const char* (*getErrorName)(CudaStatus) = nullptr;
  const char* (*getErrorString)(CudaStatus) = nullptr;

  // "cudaErrorNoDevice (100): no CUDA-capable device is detected"
  std::string describe(CudaStatus status) const;
  // Throws CudaError "<call>: <describe(status)>" unless status is success.
  void check(CudaStatus status, const char* call) const;
};

// The runtime `library` (empty: libcudart.so.13, else libcudart.so, found by
// the dynamic loader's search path) with a device: throws CudaUnavailable
// when it cannot be loaded ("--nccl needs the CUDA runtime: libcudart.so.13
// could not be loaded: ...; libcudart.so could not be loaded: ..."), lacks a
// call, or cudaGetDeviceCount fails or counts none. The library stays loaded
// for the life of the process.
std::shared_ptr<const CudaRuntime> openCudaWithDevice(const std::string& library);

}  // namespace resilient::demo
