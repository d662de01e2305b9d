// ncclNetPlugin_v9 (NCCL 2.24–2.25): size_t sizes, no profiler handles.
#include "nccl/net_v9.h"

#include "plugin/abi/legacy_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn) noexcept {
  return legacyInit(logFn);
}

void extraV9(const transport::Properties& p, int dev, ncclNetProperties_v9_t* props) {
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v9_t* props) noexcept {
  return legacy::properties(dev, props, extraV9);
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v9_t ncclNetPlugin_v9 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::legacy::devices,
    resilient::abi::getProperties,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connectDev<ncclNetDeviceHandle_v9_t>,
    resilient::abi::legacy::acceptDev<ncclNetDeviceHandle_v9_t>,
    resilient::abi::legacy::regMr,
    nullptr,  // regMrDmaBuf
    resilient::abi::legacy::deregMr,
    resilient::abi::legacy::isend,
    resilient::abi::legacy::irecv,
    resilient::abi::legacy::iflush,
    resilient::abi::legacy::test,
    resilient::abi::legacy::closeSend,
    resilient::abi::legacy::closeRecv,
    resilient::abi::legacy::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
};
