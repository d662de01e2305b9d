// ncclNetPlugin_v10 (NCCL 2.26.2–2.28): init takes the profiler callback,
// connect takes a per-communicator config; one process-wide context.
#include "nccl/net_v10.h"

#include "plugin/abi/legacy_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn, ncclProfilerCallback_t /*profFn*/) noexcept {
  return legacyInit(logFn);
}

void extraV10(const transport::Properties& p, int dev, ncclNetProperties_v10_t* props) {
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v10_t* props) noexcept {
  return legacy::properties(dev, props, extraV10);
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

extern "C" __attribute__((visibility("default"))) const ncclNet_v10_t ncclNetPlugin_v10 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::legacy::devices,
    resilient::abi::getProperties,
    resilient::abi::legacy::listen,
    resilient::abi::connect,
    resilient::abi::legacy::acceptDev<ncclNetDeviceHandle_v10_t>,
    resilient::abi::legacy::regMr,
    nullptr,  // regMrDmaBuf
    resilient::abi::legacy::deregMr,
    resilient::abi::isend,
    resilient::abi::irecv,
    resilient::abi::legacy::iflush,
    resilient::abi::legacy::test,
    resilient::abi::legacy::closeSend,
    resilient::abi::legacy::closeRecv,
    resilient::abi::legacy::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
};
