// The calls of the per-communicator-context net ABIs (v11, NCCL 2.28.3+, and
// v12, NCCL 2.30): init and finalize per context, listen and connect with the
// context, isend and irecv with profiler handles. The two versions share
// these types (net_common.h); only their properties differ.
#pragma once

#include "nccl/net_common.h"
#include "plugin/net/abi/adapter.h"
#include "plugin/net/abi/optional_calls.h"
#include "plugin/net/abi/shared_calls.h"

namespace resilient::abi::context {

inline ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
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
    CoreContext* context = nullptr;
    Status s = core->initContext(commId, cc, &context);
    if (!s.ok()) {
      CoreImpl::releaseRef(core);
      return s;
    }
    handOut(context, ctx);
    offerOptionalCalls(core->capabilities());
    return {};
  });
}

inline ncclResult_t finalize(void* ctx) noexcept {
  return boundary::call("finalize", [&]() -> Status {
    CoreImpl* core = CoreImpl::live();
    if (ctx == nullptr || core == nullptr) {
      return {};  // NCCL calls finalize even after a failed init
    }
    Status s = core->finalizeContext(as<CoreContext>(ctx));
    CoreImpl::releaseRef(core);
    return s;
  });
}

inline ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return onCore("listen", [&](CoreImpl& c) {
    return shared::listenOn(c, as<CoreContext>(ctx), dev, handle, listenComm);
  });
}

inline ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                            ncclNetDeviceHandle_v11_t** sendDevComm) noexcept {
  return onCore("connect", [&](CoreImpl& c) {
    return shared::connectOn(c, as<CoreContext>(ctx), dev, handle, sendComm, sendDevComm);
  });
}

inline ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                          void* phandle, void** request) noexcept {
  return onCore("isend", [&](CoreImpl& c) {
    return shared::postSend(c, sendComm, data, size, tag, mhandle, phandle, request);
  });
}

inline ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                          void** mhandles, void** phandles, void** request) noexcept {
  return onCore("irecv", [&](CoreImpl& c) {
    return shared::postRecv(c, recvComm, n, data, sizes, tags, mhandles, phandles, request);
  });
}

// The whole table of a context version (Net: ncclNet_v11_t or _v12_t, Props
// its properties): the same calls; the optional members NULL until init
// offers those the inner transport has (optional_calls.h).
template <class Net, class Props>
constexpr Net table() {
  return Net{
      kPluginName,
      init,
      shared::devices,
      shared::getProperties<Props>,
      listen,
      connect,
      shared::accept<ncclNetDeviceHandle_v11_t>,
      shared::regMr,
      nullptr,  // regMrDmaBuf: offered at init
      shared::deregMr,
      isend,
      irecv,
      shared::iflush,
      shared::test,
      shared::closeSend,
      shared::closeRecv,
      shared::closeListen,
      nullptr,  // getDeviceMr: offered at init
      nullptr,  // irecvConsumed: offered at init
      nullptr,  // makeVDevice: offered at init
      finalize,
      nullptr,  // setNetAttr: offered at init
  };
}

}  // namespace resilient::abi::context
