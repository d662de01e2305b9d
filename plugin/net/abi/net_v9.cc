// ncclNetPlugin_v9 (NCCL 2.24–2.25): size_t sizes, no profiler handles.
#include "nccl/net_v9.h"

#include "plugin/net/abi/legacy_calls.h"
#include "plugin/net/abi/shared_calls.h"

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    resilient::abi::kPluginName,
    resilient::abi::legacyInit,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v9_t>,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connectDev<ncclNetDeviceHandle_v9_t>,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v9_t>,
    resilient::abi::shared::regMr,
    nullptr,  // regMrDmaBuf
    resilient::abi::shared::deregMr,
    resilient::abi::legacy::isend,
    resilient::abi::legacy::irecv,
    resilient::abi::shared::iflush,
    resilient::abi::shared::test,
    resilient::abi::shared::closeSend,
    resilient::abi::shared::closeRecv,
    resilient::abi::shared::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
};
}  // extern "C"
