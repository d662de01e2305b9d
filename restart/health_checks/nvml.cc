#include "restart/health_checks/nvml.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

namespace resilient::restart::detail {
namespace {

constexpr const char* kLibrary = "libnvidia-ml.so.1";

std::mutex gMutex;
const NvmlApi* gNvml = nullptr;  // never freed: the library is never unloaded

template <typename T>
bool resolve(void* handle, const char* symbol, T* out, std::string* why) {
  *out = reinterpret_cast<T>(::dlsym(handle, symbol));
  if (*out == nullptr) {
    *why = std::string(kLibrary) + " has no " + symbol + " (driver too old?)";
    return false;
  }
  return true;
}

}  // namespace

uint64_t fieldValueAsUnsigned(const NvmlFieldValue& field) {
  switch (static_cast<NvmlValueType>(field.valueType)) {
    case NvmlValueType::kUnsignedInt: return field.value.uiVal;
    case NvmlValueType::kUnsignedLong: return field.value.ulVal;
    case NvmlValueType::kUnsignedLongLong: return field.value.ullVal;
    case NvmlValueType::kSignedLongLong:
      return field.value.sllVal < 0 ? 0 : static_cast<uint64_t>(field.value.sllVal);
    case NvmlValueType::kSignedInt:
      return field.value.siVal < 0 ? 0 : static_cast<uint64_t>(field.value.siVal);
    case NvmlValueType::kUnsignedShort: return field.value.usVal;
    case NvmlValueType::kDouble: break;
  }
  return 0;
}

std::string NvmlApi::describe(NvmlReturn result) const {
  const char* text = errorString != nullptr ? errorString(result) : nullptr;
  return "NVML error " + std::to_string(result) + ": " + (text != nullptr ? text : "unknown");
}

const NvmlApi* openNvml(std::string* why) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gNvml != nullptr) {
    return gNvml;
  }
  void* handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    *why = std::string("cannot load ") + kLibrary + ": " + (error != nullptr ? error : "?");
    return nullptr;
  }
  auto api = std::make_unique<NvmlApi>();
  api->library = kLibrary;
  NvmlReturn (*init)() = nullptr;
  if (!resolve(handle, "nvmlInit_v2", &init, why) ||
      !resolve(handle, "nvmlErrorString", &api->errorString, why) ||
      !resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &api->deviceByIndex, why) ||
      !resolve(handle, "nvmlDeviceGetHandleByPciBusId_v2", &api->deviceByPciBusId, why) ||
      !resolve(handle, "nvmlDeviceGetFieldValues", &api->getFieldValues, why) ||
      !resolve(handle, "nvmlDeviceGetNvLinkState", &api->getNvLinkState, why)) {
    return nullptr;  // the handle stays open; dlclose buys nothing here
  }
  if (const NvmlReturn result = init(); result != kNvmlSuccess) {
    *why = "nvmlInit_v2 failed: " + api->describe(result);
    return nullptr;
  }
  gNvml = api.release();
  return gNvml;
}

}  // namespace resilient::restart::detail
