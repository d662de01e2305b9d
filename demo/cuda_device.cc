#include "cuda_device.h"

namespace resilient::demo {

void checkCuda(const CudaRuntime& rt, CudaStatus status, const char* call) {
  if (status != kCudaSuccess) {
    throw CudaError(std::string(call) + ": " + rt.describe(status));
  }
}

const CudaRuntime* openCudaWithDevice(const std::string& library) {
  std::string why;
  const CudaRuntime* rt = dl::openCudaRuntime(&why, library);
  if (rt == nullptr) {
    throw CudaUnavailable("--nccl needs the CUDA runtime: " + why);
  }
  int count = 0;
  const CudaStatus status = rt->getDeviceCount(&count);
  if (status != kCudaSuccess) {
    throw CudaUnavailable("--nccl needs a CUDA device: cudaGetDeviceCount: " +
                          rt->describe(status));
  }
  if (count < 1) {
    throw CudaUnavailable("--nccl needs a CUDA device: cudaGetDeviceCount found none");
  }
  return rt;
}

}  // namespace resilient::demo
