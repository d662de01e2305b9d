// ncclNetPlugin_v8 (NCCL 2.20–2.23): int transfer sizes, size_t regMr.
#include "nccl/net_v8.h"

#include "plugin/net/abi/legacy_calls.h"
#include "plugin/net/abi/shared_calls.h"

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    resilient::abi::kPluginName,
    resilient::abi::legacyInit,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v8_t>,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connectDev<ncclNetDeviceHandle_v8_t>,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v8_t>,
    resilient::abi::shared::regMr,
    nullptr,  // regMrDmaBuf
    resilient::abi::shared::deregMr,
    resilient::abi::legacy::isendInt,
    resilient::abi::legacy::irecvInt,
    resilient::abi::shared::iflush,
    resilient::abi::shared::test,
    resilient::abi::shared::closeSend,
    resilient::abi::shared::closeRecv,
    resilient::abi::shared::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
};
}  // extern "C"
