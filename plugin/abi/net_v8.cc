// ncclNetPlugin_v8 (NCCL 2.20–2.23): int transfer sizes, size_t regMr.
#include "nccl/net_v8.h"

#include "plugin/abi/legacy_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn) noexcept {
  return legacyInit(logFn);
}

void extraV8(const transport::Properties& p, int /*dev*/, ncclNetProperties_v8_t* props) {
  props->regIsGlobal = p.regIsGlobal;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v8_t* props) noexcept {
  return legacy::properties(dev, props, extraV8);
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::legacy::devices,
    resilient::abi::getProperties,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connectDev<ncclNetDeviceHandle_v8_t>,
    resilient::abi::legacy::acceptDev<ncclNetDeviceHandle_v8_t>,
    resilient::abi::legacy::regMr,
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
