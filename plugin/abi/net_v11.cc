// ncclNetPlugin_v11 (NCCL 2.28.3+): per-communicator contexts; NCCL calls the
// struct's pointers directly.
#include "nccl/net_v11.h"

#include "plugin/abi/adapter.h"

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

ncclResult_t devices(int* ndev) noexcept {
  return onCore("devices", [&](CoreImpl& c) { return c.devices(ndev); });
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) noexcept {
  return onCore("getProperties", [&](CoreImpl& c) -> Status {
    transport::Properties p;
    RESILIENT_TRY(c.properties(dev, &p));
    *props = ncclNetProperties_v11_t{};
    fillCommonProperties(p, props);
    props->regIsGlobal = p.regIsGlobal;
    props->forceFlush = p.forceFlush;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = p.maxP2pBytes;
    props->maxCollBytes = p.maxCollBytes;
    props->maxMultiRequestSize = 1;
    return {};
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

ncclResult_t accept(void* listenComm, void** recvComm,
                    ncclNetDeviceHandle_v11_t** recvDevComm) noexcept {
  if (recvDevComm != nullptr) {
    *recvDevComm = nullptr;
  }
  return onCore("accept", [&](CoreImpl& c) { return c.accept(listenComm, recvComm); });
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return onCore("regMr", [&](CoreImpl& c) { return c.regMr(comm, data, size, type, mhandle); });
}

ncclResult_t deregMr(void* comm, void* mhandle) noexcept {
  return onCore("deregMr", [&](CoreImpl& c) { return c.deregMr(comm, mhandle); });
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

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request) noexcept {
  return onCore("iflush",
                [&](CoreImpl& c) { return c.iflush(recvComm, n, data, sizes, mhandles, request); });
}

ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  return onCore("test", [&](CoreImpl& c) { return c.test(request, done, sizes); });
}

ncclResult_t closeSend(void* sendComm) noexcept {
  return onCore("closeSend", [&](CoreImpl& c) { return c.closeSend(sendComm); });
}

ncclResult_t closeRecv(void* recvComm) noexcept {
  return onCore("closeRecv", [&](CoreImpl& c) { return c.closeRecv(recvComm); });
}

ncclResult_t closeListen(void* listenComm) noexcept {
  return onCore("closeListen", [&](CoreImpl& c) { return c.closeListen(listenComm); });
}

}  // namespace
}  // namespace resilient::abi

extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    resilient::abi::kPluginName,
    resilient::abi::init,
    resilient::abi::devices,
    resilient::abi::getProperties,
    resilient::abi::listen,
    resilient::abi::connect,
    resilient::abi::accept,
    resilient::abi::regMr,
    nullptr,  // regMrDmaBuf: no DMA-BUF through the layer
    resilient::abi::deregMr,
    resilient::abi::isend,
    resilient::abi::irecv,
    resilient::abi::iflush,
    resilient::abi::test,
    resilient::abi::closeSend,
    resilient::abi::closeRecv,
    resilient::abi::closeListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed: host plugin
    nullptr,  // makeVDevice: no NIC fusion
    resilient::abi::finalize,
    nullptr,  // setNetAttr
};
