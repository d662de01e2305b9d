// ncclNetPlugin_v6 (NCCL ≈2.12–2.18): no device handles, int sizes.
#include "nccl/net_v6.h"

#include "plugin/net/abi/legacy_calls.h"
#include "plugin/net/abi/shared_calls.h"

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v6_t ncclNetPlugin_v6 = {
    resilient::abi::kPluginName,
    resilient::abi::legacyInit,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v6_t>,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connect,
    resilient::abi::legacy::accept,
    resilient::abi::legacy::regMrInt,
    nullptr,  // regMrDmaBuf
    resilient::abi::shared::deregMr,
    resilient::abi::legacy::isendInt,
    resilient::abi::legacy::irecvInt,
    resilient::abi::shared::iflush,
    resilient::abi::shared::test,
    resilient::abi::shared::closeSend,
    resilient::abi::shared::closeRecv,
    resilient::abi::shared::closeListen,
};
}  // extern "C"
