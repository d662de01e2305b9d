// The few NVML entry points the GPU recovery check needs, reached through
// dlopen("libnvidia-ml.so.1"). The types are our own minimal declarations of
// NVML's documented ABI (NVML API reference: nvmlFieldValue_t, nvmlValue_t,
// field ids, nvmlEnableState_t), not a copy of nvml.h. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace resilient::restart::detail {

using NvmlReturn = int;  // nvmlReturn_t
inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr NvmlReturn kNvmlErrorInvalidArgument = 2;
inline constexpr NvmlReturn kNvmlErrorNotSupported = 3;

struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  // nvmlDevice_t

// nvmlValueType_t
enum class NvmlValueType : int {
  kDouble = 0,
  kUnsignedInt = 1,
  kUnsignedLong = 2,
  kUnsignedLongLong = 3,
  kSignedLongLong = 4,
  kSignedInt = 5,
  kUnsignedShort = 6,
};

// nvmlValue_t
union NvmlValue {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

// nvmlFieldValue_t
struct NvmlFieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  // NvmlValueType
  NvmlReturn nvmlReturn;
  NvmlValue value;
};
static_assert(sizeof(NvmlValue) == 8);
static_assert(offsetof(NvmlFieldValue, timestamp) == 8);
static_assert(offsetof(NvmlFieldValue, valueType) == 24);
static_assert(offsetof(NvmlFieldValue, value) == 32);
static_assert(sizeof(NvmlFieldValue) == 40);

// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (driver >= 570); its value is an
// nvmlDeviceGpuRecoveryAction_t.
inline constexpr unsigned kNvmlFieldGpuRecoveryAction = 230;
// NVML_NVLINK_MAX_LINKS in current drivers; links a GPU lacks answer
// NOT_SUPPORTED or INVALID_ARGUMENT.
inline constexpr unsigned kNvmlMaxNvLinks = 18;
inline constexpr int kNvmlFeatureEnabled = 1;  // nvmlEnableState_t

// The value of a field as an unsigned integer (0 for a negative or double).
uint64_t fieldValueAsUnsigned(const NvmlFieldValue& field);

struct NvmlApi {
  std::string library;
  const char* (*errorString)(NvmlReturn) = nullptr;
  NvmlReturn (*deviceByIndex)(unsigned int, NvmlDevice*) = nullptr;    // _v2
  NvmlReturn (*deviceByPciBusId)(const char*, NvmlDevice*) = nullptr;  // _v2
  NvmlReturn (*getFieldValues)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  NvmlReturn (*getNvLinkState)(NvmlDevice, unsigned int, int*) = nullptr;

  // "NVML error 3: Not Supported".
  std::string describe(NvmlReturn result) const;
};

// libnvidia-ml.so.1, loaded and initialised (nvmlInit_v2) once per process and
// never shut down (a check may run at any time, on any thread). nullptr and
// *why when it cannot be loaded or initialised.
const NvmlApi* openNvml(std::string* why);

}  // namespace resilient::restart::detail
