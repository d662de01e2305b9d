// ncclNetPlugin_v10 (NCCL 2.26.2–2.28): init takes the profiler callback,
// connect takes a per-communicator config; one process-wide context.
#include "nccl/net_v10.h"

#include "plugin/net/abi/legacy_calls.h"
#include "plugin/net/abi/shared_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn, ncclProfilerCallback_t /*profFn*/) noexcept {
  return legacyInit(logFn);
}

ncclResult_t connect(int dev, ncclNetCommConfig_v10_t* /*config*/, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v10_t** sendDevComm) noexcept {
  return legacy::connectDev(dev, handle, sendComm, sendDevComm);
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                   void* /*phandle*/, void** request) noexcept {
  return legacy::isend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** /*phandles*/, void** request) noexcept {
  return legacy::irecv(recvComm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace resilient::abi

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v10_t>,
    resilient::abi::legacy::listen,
    resilient::abi::connect,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v10_t>,
    resilient::abi::shared::regMr,
    nullptr,  // regMrDmaBuf
    resilient::abi::shared::deregMr,
    resilient::abi::isend,
    resilient::abi::irecv,
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
