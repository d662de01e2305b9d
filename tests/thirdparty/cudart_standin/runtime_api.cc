// libcudart.so, the stand-in: a CUDA runtime of our own, test only, so that
// a net plugin built against CUDA (aws-ofi-nccl with --enable-cudart-dynamic)
// initialises on a machine without a GPU or a driver. It exports the three
// runtime entry points such a plugin dlsyms: the runtime version (13000) and
// the lookup of driver entry points, which driver_api.cc implements with host
// memory semantics. Put its directory first in LD_LIBRARY_PATH. Called from
// the plugin's init (NCCL's main thread).
#include <string_view>

#include "tests/thirdparty/cudart_standin/cuda_types.h"
#include "tests/thirdparty/cudart_standin/driver_api.h"

namespace resilient::cudart_standin {
namespace {

int lookUp(const char* symbol, void** function, unsigned int version, int* status) {
  if (symbol == nullptr || function == nullptr) {
    return kCudaErrorInvalidValue;
  }
  const bool tooNew = version > static_cast<unsigned int>(kCudaVersion);
  *function = tooNew ? nullptr : driverEntryPoint(std::string_view(symbol));
  if (status != nullptr) {
    *status = tooNew                 ? kEntryPointVersionNotSufficient
              : *function != nullptr ? kEntryPointSuccess
                                     : kEntryPointSymbolNotFound;
  }
  // Like the runtime: a symbol not found is reported through the status.
  return kCudaSuccess;
}

}  // namespace
}  // namespace resilient::cudart_standin

namespace standin = resilient::cudart_standin;

extern "C" {

__attribute__((visibility("default"))) int cudaRuntimeGetVersion(int* version);
__attribute__((visibility("default"))) int cudaGetDriverEntryPointByVersion(
    const char* symbol, void** function, unsigned int version, unsigned long long flags,
    int* status);
__attribute__((visibility("default"))) int cudaGetDriverEntryPoint(const char* symbol,
                                                                   void** function,
                                                                   unsigned long long flags,
                                                                   int* status);

int cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) {
    return standin::kCudaErrorInvalidValue;
  }
  *version = standin::kCudaVersion;
  return standin::kCudaSuccess;
}

int cudaGetDriverEntryPointByVersion(const char* symbol, void** function, unsigned int version,
                                     unsigned long long /*flags*/, int* status) {
  return standin::lookUp(symbol, function, version, status);
}

// The pre-13 lookup: the newest version of each entry point.
int cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long /*flags*/,
                            int* status) {
  return standin::lookUp(symbol, function, static_cast<unsigned int>(standin::kCudaVersion),
                         status);
}

}  // extern "C"
