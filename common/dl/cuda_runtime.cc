#include "common/dl/cuda_runtime.h"

#include <dlfcn.h>

#include <array>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace resilient::dl {
namespace {

// Every runtime bound so far, by its dlopen handle; never freed (see
// openCudaRuntime()). Guarded by gMutex.
struct Bound {
  void* handle;
  const CudaRuntime* runtime;
};
std::vector<Bound>& bound() {
  static auto* all = new std::vector<Bound>();
  return *all;
}
std::mutex gMutex;
const CudaRuntime* gDefault = nullptr;  // the answer of the search without a library

template <typename T>
void resolve(void* handle, const char* symbol, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, symbol));
  if (*out == nullptr && missing->empty()) {
    *missing = symbol;
  }
}

// The runtime of `handle`, bound on its first use; nullptr with the first
// missing call in *missing when it is not a (recent enough) CUDA runtime.
// Caller holds gMutex.
const CudaRuntime* bind(void* handle, const std::string& library, std::string* missing) {
  for (const Bound& b : bound()) {
    if (b.handle == handle) {
      return b.runtime;
    }
  }
  auto rt = std::make_unique<CudaRuntime>();
  rt->library = library;
  resolve(handle, "cudaGetDeviceCount", &rt->getDeviceCount, missing);
  resolve(handle, "cudaGetDevice", &rt->getDevice, missing);
  resolve(handle, "cudaSetDevice", &rt->setDevice, missing);
  resolve(handle, "cudaDeviceSynchronize", &rt->deviceSynchronize, missing);
  resolve(handle, "cudaDeviceGetPCIBusId", &rt->deviceGetPCIBusId, missing);
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
  if (!missing->empty()) {
    return nullptr;
  }
  bound().push_back({handle, rt.get()});
  return rt.release();
}

// The first of `names` that dlopen with `flags` opens and that has every
// call. What failed, candidate by candidate, is appended to *failures when
// it is not null. A handle is never closed, even one without the calls:
// dlclose of a CUDA runtime is never safe. Caller holds gMutex.
template <typename Names>
const CudaRuntime* firstOf(const Names& names, int flags, std::string* failures) {
  for (const auto& name : names) {
    const std::string library(name);
    void* handle = ::dlopen(library.c_str(), flags);
    std::string failure;
    if (handle == nullptr) {
      const char* error = ::dlerror();
      failure = library + " could not be loaded: " + (error != nullptr ? error : "unknown error");
    } else {
      std::string missing;
      if (const CudaRuntime* rt = bind(handle, library, &missing)) {
        return rt;
      }
      failure = library + " has no " + missing + ": not a usable CUDA runtime";
    }
    if (failures != nullptr) {
      *failures += (failures->empty() ? "" : "; ") + failure;
    }
  }
  return nullptr;
}

// The runtime the process has loaded, found once. Caller holds gMutex.
const CudaRuntime* defaultLoaded() {
  if (gDefault == nullptr) {
    gDefault = firstOf(kCudaRuntimeNames, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, nullptr);
  }
  return gDefault;
}

}  // namespace

std::string CudaRuntime::describe(CudaStatus status) const {
  const char* name = getErrorName(status);
  const char* text = getErrorString(status);
  return std::string(name != nullptr ? name : "cudaError") + " (" + std::to_string(status) +
         "): " + (text != nullptr ? text : "unknown error");
}

const CudaRuntime* loadedCudaRuntime() noexcept {
  try {
    const std::lock_guard<std::mutex> lock(gMutex);
    return defaultLoaded();
  } catch (...) {
    return nullptr;  // out of memory: treat as "no runtime"
  }
}

const CudaRuntime* openCudaRuntime(std::string* why, const std::string& library) {
  const std::lock_guard<std::mutex> lock(gMutex);
  std::string failures;
  if (!library.empty()) {
    const std::array<std::string, 1> only = {library};
    if (const CudaRuntime* rt = firstOf(only, RTLD_NOW | RTLD_LOCAL, &failures)) {
      return rt;
    }
    *why = std::move(failures);
    return nullptr;
  }
  if (defaultLoaded() == nullptr) {
    gDefault = firstOf(kCudaRuntimeNames, RTLD_NOW | RTLD_LOCAL, &failures);
  }
  if (gDefault == nullptr) {
    *why = std::move(failures);
  }
  return gDefault;
}

}  // namespace resilient::dl
