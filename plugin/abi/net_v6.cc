// ncclNetPlugin_v6 (NCCL ≈2.12–2.18): no device handles, int sizes.
#include "nccl/net_v6.h"

#include "plugin/abi/legacy_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(ncclDebugLogger_t logFn) noexcept {
  return legacyInit(logFn);
}

void extraV6(const transport::Properties& /*p*/, int /*dev*/, ncclNetProperties_v6_t* /*props*/) {}

ncclResult_t getProperties(int dev, ncclNetProperties_v6_t* props) noexcept {
  return legacy::properties(dev, props, extraV6);
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v6_t ncclNetPlugin_v6 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::legacy::devices,
    resilient::abi::getProperties,
    resilient::abi::legacy::listen,
    resilient::abi::legacy::connect,
    resilient::abi::legacy::accept,
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
};
