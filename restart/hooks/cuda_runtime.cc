#include "restart/hooks/cuda_runtime.h"

#include <dlfcn.h>

#include <array>
#include <memory>
#include <mutex>

namespace resilient::restart::detail {
namespace {

// Newest first: a process built against CUDA 13 has libcudart.so.13 loaded.
constexpr std::array<const char*, 3> kLibraries = {"libcudart.so.13", "libcudart.so.12",
                                                   "libcudart.so"};

std::mutex gMutex;
const CudaRuntime* gRuntime = nullptr;  // never freed: see openCudaRuntime()

template <typename T>
bool resolve(void* handle, const char* symbol, T* out, std::string* missing) {
  *out = reinterpret_cast<T>(::dlsym(handle, symbol));
  if (*out == nullptr) {
    *missing = symbol;
    return false;
  }
  return true;
}

// Fills a CudaRuntime from an open handle; nullptr (and *why) when a symbol
// is missing (not a CUDA runtime, or too old).
std::unique_ptr<CudaRuntime> bind(void* handle, const char* library, std::string* why) {
  auto rt = std::make_unique<CudaRuntime>();
  rt->library = library;
  std::string missing;
  const bool ok = resolve(handle, "cudaGetDeviceCount", &rt->getDeviceCount, &missing) &&
                  resolve(handle, "cudaGetDevice", &rt->getDevice, &missing) &&
                  resolve(handle, "cudaSetDevice", &rt->setDevice, &missing) &&
                  resolve(handle, "cudaDeviceSynchronize", &rt->deviceSynchronize, &missing) &&
                  resolve(handle, "cudaGetLastError", &rt->getLastError, &missing) &&
                  resolve(handle, "cudaDeviceGetPCIBusId", &rt->deviceGetPCIBusId, &missing) &&
                  resolve(handle, "cudaGetErrorName", &rt->getErrorName, &missing) &&
                  resolve(handle, "cudaGetErrorString", &rt->getErrorString, &missing);
  if (!ok) {
    *why = std::string(library) + " has no " + missing + ": not a usable CUDA runtime";
    return nullptr;
  }
  return rt;
}

// Caller holds gMutex.
const CudaRuntime* tryOpen(int flags, std::string* why) {
  for (const char* library : kLibraries) {
    void* handle = ::dlopen(library, flags);
    if (handle == nullptr) {
      continue;
    }
    auto rt = bind(handle, library, why);
    if (rt == nullptr) {
      continue;  // the handle stays open: dlclose of a runtime is never safe
    }
    gRuntime = rt.release();
    return gRuntime;
  }
  return nullptr;
}

}  // namespace

std::string CudaRuntime::describe(CudaError error) const {
  const char* name = getErrorName(error);
  const char* text = getErrorString(error);
  return std::string(name != nullptr ? name : "cudaError") + " (" + std::to_string(error) +
         "): " + (text != nullptr ? text : "unknown error");
}

const CudaRuntime* loadedCudaRuntime() noexcept {
  try {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gRuntime != nullptr) {
      return gRuntime;
    }
    std::string why;
    return tryOpen(RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, &why);
  } catch (...) {
    return nullptr;  // out of memory: treat as "no runtime"
  }
}

const CudaRuntime* openCudaRuntime(std::string* why) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gRuntime != nullptr) {
    return gRuntime;
  }
  std::string bindError;
  if (const CudaRuntime* rt = tryOpen(RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, &bindError)) {
    return rt;
  }
  if (const CudaRuntime* rt = tryOpen(RTLD_NOW | RTLD_LOCAL, &bindError)) {
    return rt;
  }
  *why = bindError.empty() ? "no CUDA runtime found (dlopen of libcudart.so.13, "
                             "libcudart.so.12 and libcudart.so failed)"
                           : bindError;
  return nullptr;
}

}  // namespace resilient::restart::detail
