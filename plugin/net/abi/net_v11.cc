// ncclNetPlugin_v11 (NCCL 2.28.3+): per-communicator contexts; NCCL calls the
// struct's pointers directly.
#include "nccl/net_v11.h"

#include "plugin/net/abi/adapter.h"
#include "plugin/net/abi/shared_calls.h"

namespace resilient::abi {
namespace {

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFn, ncclProfilerCallback_t /*profFn*/) noexcept {
  return boundary::call("init", [&]() -> Status {
    *ctx = nullptr;
    Status error;
    CoreImpl* core = CoreImpl::acquire(selfIdentity(), logFn, &error);
    if (core == nullptr) {
      return error;
    }
    transport::CommConfig cc;
    cc.trafficClass = config != nullptr ? config->trafficClass : -1;
    Status s = core->initContext(commId, cc, ctx);
    if (!s.ok()) {
      CoreImpl::releaseRef(core);
    }
    return s;
  });
}

ncclResult_t finalize(void* ctx) noexcept {
  return boundary::call("finalize", [&]() -> Status {
    CoreImpl* core = CoreImpl::live();
    if (ctx == nullptr || core == nullptr) {
      return {};  // NCCL calls finalize even after a failed init
    }
    Status s = core->finalizeContext(ctx);
    CoreImpl::releaseRef(core);
    return s;
  });
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return onCore("listen", [&](CoreImpl& c) { return c.listen(ctx, dev, handle, listenComm); });
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** sendDevComm) noexcept {
  if (sendDevComm != nullptr) {
    *sendDevComm = nullptr;  // host plugin: no device offload
  }
  return onCore("connect", [&](CoreImpl& c) { return c.connect(ctx, dev, handle, sendComm); });
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) noexcept {
  return onCore("isend", [&](CoreImpl& c) {
    return c.isend(sendComm, data, size, tag, mhandle, phandle, request);
  });
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) noexcept {
  return onCore("irecv", [&](CoreImpl& c) {
    return c.irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  });
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::shared::devices,
    resilient::abi::shared::getProperties<ncclNetProperties_v11_t>,
    resilient::abi::listen,
    resilient::abi::connect,
    resilient::abi::shared::accept<ncclNetDeviceHandle_v11_t>,
    resilient::abi::shared::regMr,
    nullptr,  // regMrDmaBuf: no DMA-BUF through the layer
    resilient::abi::shared::deregMr,
    resilient::abi::isend,
    resilient::abi::irecv,
    resilient::abi::shared::iflush,
    resilient::abi::shared::test,
    resilient::abi::shared::closeSend,
    resilient::abi::shared::closeRecv,
    resilient::abi::shared::closeListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed: host plugin
    nullptr,  // makeVDevice: no NIC fusion
    resilient::abi::finalize,
    nullptr,  // setNetAttr
};
