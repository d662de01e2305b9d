// ncclNetPlugin_v11 (NCCL 2.28.3+): per-communicator contexts; NCCL calls the
// struct's pointers directly.
#include "nccl/net_v11.h"

#include "plugin/net/abi/context_calls.h"

extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    resilient::abi::kPluginName,
    resilient::abi::context::init,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v11_t>,
    resilient::abi::context::listen,
    resilient::abi::context::connect,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v11_t>,
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
