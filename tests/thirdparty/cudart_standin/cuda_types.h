// The few CUDA runtime and driver API types and values the stand-in CUDA
// runtime needs, declared here from the API's documented values (CUDA 13.0);
// no CUDA header is included. Every driver result the stand-in returns is
// one of these, and every signature it hands out uses these types.
#pragma once

#include <cstddef>

namespace resilient::cudart_standin {

// What both APIs report as their version (CUDA 13.0).
inline constexpr int kCudaVersion = 13000;

// cudaError_t values returned by the runtime entry points.
enum CudaError : int {
  kCudaSuccess = 0,
  kCudaErrorInvalidValue = 1,
};

// enum cudaDriverEntryPointQueryResult.
enum EntryPointStatus : int {
  kEntryPointSuccess = 0,
  kEntryPointSymbolNotFound = 1,
  kEntryPointVersionNotSufficient = 2,
};

// CUresult values returned by the driver entry points.
enum CuResult : int {
  kCuSuccess = 0,
  kCuErrorInvalidValue = 1,
  kCuErrorOutOfMemory = 2,
  kCuErrorInvalidDevice = 101,
  kCuErrorInvalidHandle = 400,
  kCuErrorNotFound = 500,
  kCuErrorNotSupported = 801,
};

using CuDevice = int;
using CuDevicePtr = unsigned long long;  // CUdeviceptr (the 64-bit "_v2" one)
using CuContext = void*;                 // an opaque CUcontext
using CuStream = void*;                  // an opaque CUstream
using CuAllocationHandle = unsigned long long;

// CUpointer_attribute values the stand-in answers.
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;
// CUmemorytype: what a pointer that the stand-in allocated is.
inline constexpr unsigned int kMemoryTypeDevice = 2;

}  // namespace resilient::cudart_standin
