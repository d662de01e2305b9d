// The CUDA device of the demo's NCCL mode (--nccl): the CUDA runtime comes
// from the one loader of common/dl (dlopen; the demo includes no CUDA header
// and links no CUDA library, so it builds and runs in host-engine mode where
// CUDA is absent), and --nccl needs a device on it.
#pragma once

#include <stdexcept>
#include <string>

#include "common/dl/cuda_runtime.h"

namespace resilient::demo {

using dl::CudaRuntime;
using dl::CudaStatus;
using dl::CudaStream;
using dl::kCudaErrorNotReady;
using dl::kCudaMemcpyDeviceToHost;
using dl::kCudaMemcpyHostToDevice;
using dl::kCudaStreamNonBlocking;
using dl::kCudaSuccess;

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

// Throws CudaError "<call>: <rt.describe(status)>" unless status is success.
void checkCuda(const CudaRuntime& rt, CudaStatus status, const char* call);

// The runtime `library` (empty: the loader's own search, libcudart.so.13,
// .so.12, then libcudart.so) with a device: throws CudaUnavailable when it
// cannot be loaded ("--nccl needs the CUDA runtime: libcudart.so.13 could
// not be loaded: ...; libcudart.so.12 could not be loaded: ...; ..."), or
// cudaGetDeviceCount fails or counts none. Never null; the runtime stays
// loaded for the life of the process.
const CudaRuntime* openCudaWithDevice(const std::string& library);

}  // namespace resilient::demo
