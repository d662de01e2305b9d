#include "tests/thirdparty/cudart_standin/driver_api.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "tests/thirdparty/cudart_standin/cuda_types.h"

namespace resilient::cudart_standin {
namespace {

// "Device" memory is page-aligned host memory; the allocations are recorded
// so that pointer queries can tell them from other host memory.
constexpr size_t kAllocationAlignment = 4096;

class Allocations {
 public:
  void add(uintptr_t base, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    sizeByBase_[base] = size;
  }
  bool remove(uintptr_t base) {
    std::lock_guard<std::mutex> lock(mutex_);
    return sizeByBase_.erase(base) == 1;
  }
  // The allocation that holds `address`: {base, size}, or {0, 0}.
  std::pair<uintptr_t, size_t> find(uintptr_t address) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizeByBase_.upper_bound(address);
    if (it == sizeByBase_.begin()) {
      return {0, 0};
    }
    --it;
    if (address - it->first >= it->second) {
      return {0, 0};
    }
    return *it;
  }

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> sizeByBase_;
};

Allocations& allocations() {
  static Allocations all;
  return all;
}

// A "device" address is a host address.
void* hostAddress(CuDevicePtr ptr) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));  // NOLINT(performance-no-int-to-ptr)
}

// Work is done when it is issued, so one stream serves every caller.
char theStream;
thread_local CuContext currentContext = nullptr;
thread_local int streamCaptureMode = 0;

int driverGetVersion(int* version) {
  if (version == nullptr) {
    return kCuErrorInvalidValue;
  }
  *version = kCudaVersion;
  return kCuSuccess;
}

struct ResultText {
  int result;
  const char* name;
  const char* text;
};
constexpr ResultText kResultTexts[] = {
    {kCuSuccess, "CUDA_SUCCESS", "no error"},
    {kCuErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kCuErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kCuErrorInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kCuErrorInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kCuErrorNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kCuErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported (stand-in CUDA runtime: no GPU)"},
};

const ResultText* resultText(int result) {
  for (const ResultText& t : kResultTexts) {
    if (t.result == result) {
      return &t;
    }
  }
  return nullptr;
}

int getErrorName(int result, const char** name) {
  const ResultText* t = resultText(result);
  if (name == nullptr || t == nullptr) {
    return kCuErrorInvalidValue;
  }
  *name = t->name;
  return kCuSuccess;
}

int getErrorString(int result, const char** text) {
  const ResultText* t = resultText(result);
  if (text == nullptr || t == nullptr) {
    return kCuErrorInvalidValue;
  }
  *text = t->text;
  return kCuSuccess;
}

// One device, ordinal 0, current in every context.
int ctxGetDevice(CuDevice* device) {
  if (device == nullptr) {
    return kCuErrorInvalidValue;
  }
  *device = 0;
  return kCuSuccess;
}

int ctxSetCurrent(CuContext context) {
  currentContext = context;
  return kCuSuccess;
}

int ctxGetCurrent(CuContext* context) {
  if (context == nullptr) {
    return kCuErrorInvalidValue;
  }
  *context = currentContext;
  return kCuSuccess;
}

// Every attribute is 0: no GPUDirect RDMA, no flush options, no DMA-BUF.
int deviceGetAttribute(int* value, int /*attribute*/, CuDevice device) {
  if (value == nullptr) {
    return kCuErrorInvalidValue;
  }
  if (device != 0) {
    return kCuErrorInvalidDevice;
  }
  *value = 0;
  return kCuSuccess;
}

int pointerGetAttributes(unsigned int count, const int* attributes, void** data, CuDevicePtr ptr) {
  if (attributes == nullptr || data == nullptr) {
    return kCuErrorInvalidValue;
  }
  const bool ours = allocations().find(static_cast<uintptr_t>(ptr)).second != 0;
  for (unsigned int i = 0; i < count; ++i) {
    if (data[i] == nullptr) {
      return kCuErrorInvalidValue;
    }
    switch (attributes[i]) {
      case kPointerAttributeMemoryType:
        // Not a CUDA pointer: 0, and success, as the driver answers.
        *static_cast<unsigned int*>(data[i]) = ours ? kMemoryTypeDevice : 0;
        break;
      case kPointerAttributeDeviceOrdinal: *static_cast<int*>(data[i]) = ours ? 0 : -1; break;
      default: return kCuErrorInvalidValue;
    }
  }
  return kCuSuccess;
}

int memAlloc(CuDevicePtr* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) {
    return kCuErrorInvalidValue;
  }
  const size_t rounded =
      (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  void* p = std::aligned_alloc(kAllocationAlignment, rounded);
  if (p == nullptr) {
    return kCuErrorOutOfMemory;
  }
  allocations().add(reinterpret_cast<uintptr_t>(p), rounded);
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kCuSuccess;
}

int memFree(CuDevicePtr ptr) {
  if (ptr == 0) {
    return kCuSuccess;
  }
  if (!allocations().remove(static_cast<uintptr_t>(ptr))) {
    return kCuErrorInvalidValue;
  }
  std::free(hostAddress(ptr));
  return kCuSuccess;
}

int memGetAddressRange(CuDevicePtr* base, size_t* size, CuDevicePtr ptr) {
  const auto [b, s] = allocations().find(static_cast<uintptr_t>(ptr));
  if (s == 0) {
    return kCuErrorNotFound;
  }
  if (base != nullptr) {
    *base = b;
  }
  if (size != nullptr) {
    *size = s;
  }
  return kCuSuccess;
}

int memsetD8(CuDevicePtr dst, unsigned char value, size_t count) {
  std::memset(hostAddress(dst), value, count);
  return kCuSuccess;
}

int memcpyHtoDAsync(CuDevicePtr dst, const void* src, size_t bytes, CuStream /*stream*/) {
  std::memcpy(hostAddress(dst), src, bytes);
  return kCuSuccess;
}

int streamCreate(CuStream* stream, unsigned int /*flags*/) {
  if (stream == nullptr) {
    return kCuErrorInvalidValue;
  }
  *stream = &theStream;
  return kCuSuccess;
}

int streamSynchronize(CuStream stream) {
  return stream == &theStream || stream == nullptr ? kCuSuccess : kCuErrorInvalidHandle;
}

int streamDestroy(CuStream stream) {
  return stream == &theStream ? kCuSuccess : kCuErrorInvalidHandle;
}

// Host memory is what the "device" reads already: registering it changes
// nothing, and its device address is its host address.
int memHostRegister(void* p, size_t bytes, unsigned int /*flags*/) {
  return p != nullptr && bytes != 0 ? kCuSuccess : kCuErrorInvalidValue;
}

int memHostUnregister(void* p) {
  return p != nullptr ? kCuSuccess : kCuErrorInvalidValue;
}

int memHostGetDevicePointer(CuDevicePtr* dptr, void* p, unsigned int flags) {
  if (dptr == nullptr || p == nullptr || flags != 0) {
    return kCuErrorInvalidValue;
  }
  *dptr = reinterpret_cast<uintptr_t>(p);
  return kCuSuccess;
}

// Nothing is ever captured; the mode is only kept per thread and swapped.
int threadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr) {
    return kCuErrorInvalidValue;
  }
  std::swap(*mode, streamCaptureMode);
  return kCuSuccess;
}

// What needs a GPU (or a GPU's memory behind a NIC) is not supported.
int flushGpuDirectRdmaWrites(int /*target*/, int /*scope*/) {
  return kCuErrorNotSupported;
}
int memGetHandleForAddressRange(void*, CuDevicePtr, size_t, int, unsigned long long) {
  return kCuErrorNotSupported;
}
int memCreate(CuAllocationHandle*, size_t, const void*, unsigned long long) {
  return kCuErrorNotSupported;
}
int memRelease(CuAllocationHandle) {
  return kCuErrorNotSupported;
}
int memAddressReserve(CuDevicePtr*, size_t, size_t, CuDevicePtr, unsigned long long) {
  return kCuErrorNotSupported;
}
int memAddressFree(CuDevicePtr, size_t) {
  return kCuErrorNotSupported;
}
int memMap(CuDevicePtr, size_t, size_t, CuAllocationHandle, unsigned long long) {
  return kCuErrorNotSupported;
}
int memUnmap(CuDevicePtr, size_t) {
  return kCuErrorNotSupported;
}
int memSetAccess(CuDevicePtr, size_t, const void*, size_t) {
  return kCuErrorNotSupported;
}
int memGetAllocationGranularity(size_t*, const void*, int) {
  return kCuErrorNotSupported;
}
int memRetainAllocationHandle(CuAllocationHandle*, void*) {
  return kCuErrorNotSupported;
}
int memGetAllocationPropertiesFromHandle(void*, CuAllocationHandle) {
  return kCuErrorNotSupported;
}

struct EntryPoint {
  std::string_view name;
  void* function;
};

template <typename F>
void* entry(F* f) {
  return reinterpret_cast<void*>(f);
}

const EntryPoint kEntryPoints[] = {
    {"cuDriverGetVersion", entry(driverGetVersion)},
    {"cuGetErrorName", entry(getErrorName)},
    {"cuGetErrorString", entry(getErrorString)},
    {"cuCtxGetDevice", entry(ctxGetDevice)},
    {"cuCtxSetCurrent", entry(ctxSetCurrent)},
    {"cuCtxGetCurrent", entry(ctxGetCurrent)},
    {"cuDeviceGetAttribute", entry(deviceGetAttribute)},
    {"cuPointerGetAttributes", entry(pointerGetAttributes)},
    {"cuMemAlloc", entry(memAlloc)},
    {"cuMemFree", entry(memFree)},
    {"cuMemGetAddressRange", entry(memGetAddressRange)},
    {"cuMemsetD8", entry(memsetD8)},
    {"cuMemcpyHtoDAsync", entry(memcpyHtoDAsync)},
    {"cuStreamCreate", entry(streamCreate)},
    {"cuStreamSynchronize", entry(streamSynchronize)},
    {"cuStreamDestroy", entry(streamDestroy)},
    {"cuMemHostRegister", entry(memHostRegister)},
    {"cuMemHostUnregister", entry(memHostUnregister)},
    {"cuMemHostGetDevicePointer", entry(memHostGetDevicePointer)},
    {"cuThreadExchangeStreamCaptureMode", entry(threadExchangeStreamCaptureMode)},
    {"cuFlushGPUDirectRDMAWrites", entry(flushGpuDirectRdmaWrites)},
    {"cuMemGetHandleForAddressRange", entry(memGetHandleForAddressRange)},
    {"cuMemCreate", entry(memCreate)},
    {"cuMemRelease", entry(memRelease)},
    {"cuMemAddressReserve", entry(memAddressReserve)},
    {"cuMemAddressFree", entry(memAddressFree)},
    {"cuMemMap", entry(memMap)},
    {"cuMemUnmap", entry(memUnmap)},
    {"cuMemSetAccess", entry(memSetAccess)},
    {"cuMemGetAllocationGranularity", entry(memGetAllocationGranularity)},
    {"cuMemRetainAllocationHandle", entry(memRetainAllocationHandle)},
    {"cuMemGetAllocationPropertiesFromHandle", entry(memGetAllocationPropertiesFromHandle)},
};

}  // namespace

void* driverEntryPoint(std::string_view name) {
  for (const EntryPoint& e : kEntryPoints) {
    if (e.name == name) {
      return e.function;
    }
  }
  return nullptr;
}

}  // namespace resilient::cudart_standin
