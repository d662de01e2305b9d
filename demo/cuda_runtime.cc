#include "cuda_runtime.h"

#include <dlfcn.h>

#include <vector>

namespace resilient::demo {

namespace {

// The runtime of the CUDA the demo is built next to first, then any.
const std::vector<std::string> kDefaultLibraries = {"libcudart.so.13", "libcudart.so"};

template <typename T>
void resolve(void* handle, const char* symbol, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, symbol));
  if (*out == nullptr && missing->empty()) {
    *missing = symbol;
  }
}

// Binds every call of `handle`; the name of the first missing one in *missing.
std::shared_ptr<CudaRuntime> bind(void* handle, const std::string& library, std::string* missing) {
  auto rt = std::make_shared<CudaRuntime>();
  rt->library = library;
  resolve(handle, "cudaGetDeviceCount", &rt->getDeviceCount, missing);
  resolve(handle, "cudaSetDevice", &rt->setDevice, missing);
  resolve(handle, "cudaMalloc", &rt->mallocDevice, missing);
  resolve(handle, "cudaFree", &rt->freeDevice, missing);
  resolve(handle, "cudaMallocHost", &rt->mallocHost, missing);
  resolve(handle, "cudaFreeHost", &rt->freeHost, missing);
  resolve(handle, "cudaMemcpyAsync", &rt->memcpyAsync, missing);
  resolve(handle, "cudaStreamCreateWithFlags", &rt->streamCreateWithFlags, missing);
  resolve(handle, "cudaStreamDestroy", &rt->streamDestroy, missing);
  resolve(handle, "cudaStreamQuery", &rt->streamQuery, missing);
  resolve(handle, "cudaGetErrorName", &rt->getErrorName, missing);
  resolve(handle, "cudaGetErrorString", &rt->getErrorString, missing);
  return missing->empty() ? rt : nullptr;
}

}  // namespace

std::string CudaRuntime::describe(CudaStatus status) const {
  const char* name = getErrorName(status);
  const char* text = getErrorString(status);
  return std::string(name != nullptr ? name : "cudaError") + " (" + std::to_string(status) +
         "): " + (text != nullptr ? text : "unknown error");
}

void CudaRuntime::check(CudaStatus status, const char* call) const {
  if (status != kCudaSuccess) {
    throw CudaError(std::string(call) + ": " + describe(status));
  }
}

std::shared_ptr<const CudaRuntime> openCudaWithDevice(const std::string& library) {
  const std::vector<std::string> names =
      library.empty() ? kDefaultLibraries : std::vector<std::string>{library};
  std::string failures;
  std::shared_ptr<CudaRuntime> rt;
  for (const std::string& name : names) {
    // Never closed: a runtime is not safe to unload, and NCCL's buffers live in it.
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      failures += (failures.empty() ? "" : "; ") + name +
                  " could not be loaded: " + (why != nullptr ? why : "unknown error");
      continue;
    }
    std::string missing;
    rt = bind(handle, name, &missing);
    if (rt != nullptr) {
      break;
    }
    failures += (failures.empty() ? "" : "; ") + name + " has no " + missing +
                ": not a usable CUDA runtime";
  }
  if (rt == nullptr) {
    throw CudaUnavailable("--nccl needs the CUDA runtime: " + failures);
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
