// ncclNetPlugin_v12 (NCCL 2.30): v11's calls with the v12 properties (8 fused
// devices, railId and planeId); NCCL calls the struct's pointers directly.
#include "nccl/net_v12.h"

#include "plugin/net/abi/context_calls.h"

extern "C" __attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    resilient::abi::kPluginName,
    resilient::abi::context::init,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v12_t>,
    resilient::abi::context::listen,
    resilient::abi::context::connect,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v12_t>,
    resilient::abi::shared::regMr,
    nullptr,  // regMrDmaBuf: no DMA-BUF through the layer
    resilient::abi::shared::deregMr,
    resilient::abi::context::isend,
    resilient::abi::context::irecv,
    resilient::abi::shared::iflush,
    resilient::abi::shared::test,
    resilient::abi::shared::closeSend,
    resilient::abi::shared::closeRecv,
    resilient::abi::shared::closeListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed: host plugin
    nullptr,  // makeVDevice: no NIC fusion
    resilient::abi::context::finalize,
    nullptr,  // setNetAttr
};
