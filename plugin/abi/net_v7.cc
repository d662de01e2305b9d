// ncclNetPlugin_v7 (NCCL 2.19): int sizes everywhere, device-type properties.
#include "nccl/net_v7.h"

#include "plugin/abi/legacy_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn) noexcept {
  return legacyInit(logFn);
}

void extraV7(const transport::Properties& /*p*/, int /*dev*/, ncclNetProperties_v7_t* props) {
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v7_t* props) noexcept {
  return legacy::properties(dev, props, extraV7);
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v7_t ncclNetPlugin_v7 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::legacy::devices,
    resilient::abi::getProperties,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connectDev<ncclNetDeviceHandle_v7_t>,
    resilient::abi::legacy::acceptDev<ncclNetDeviceHandle_v7_t>,
    resilient::abi::legacy::regMrInt,
    nullptr,  // regMrDmaBuf
    resilient::abi::legacy::deregMr,
    resilient::abi::legacy::isendInt,
    resilient::abi::legacy::irecvInt,
    resilient::abi::legacy::iflush,
    resilient::abi::legacy::test,
    resilient::abi::legacy::closeSend,
    resilient::abi::legacy::closeRecv,
    resilient::abi::legacy::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
};
