// Calls whose C signature is the same in several net ABI versions, each a
// thin conversion onto the core: the adapters list them in their structs.
// The calls of the versions without per-communicator contexts (v6–v10) are
// in legacy_calls.h.
#pragma once

#include "plugin/net/abi/adapter.h"

namespace resilient::abi::shared {

// The data path's posts, shared by every version: typed, then onto the core.
inline Status postSend(CoreImpl& c, void* sendComm, void* data, size_t size, int tag,
                       void* mhandle, void* phandle, void** request) {
  *request = nullptr;
  CoreRequest* r = nullptr;
  RESILIENT_TRY(c.isend(*as<CoreComm>(sendComm), static_cast<std::byte*>(data), size, tag,
                        as<CoreRegion>(mhandle), static_cast<transport::ProfilerHandle*>(phandle),
                        &r));
  handOut(r, request);
  return {};
}

inline Status postRecv(CoreImpl& c, void* recvComm, int n, void** data, const size_t* sizes,
                       const int* tags, void** mhandles, void** phandles, void** request) {
  *request = nullptr;  // always overwrite: NCCL may have stored 0x1 there
  Pieces p;
  if (!p.fill(n, data, mhandles, phandles)) {
    return internalError("irecv: more pieces than NCCL can group");
  }
  CoreRequest* r = nullptr;
  RESILIENT_TRY(c.irecv(*as<CoreComm>(recvComm), n, p.data.data(), sizes, tags,
                        p.regions.data(), p.profilerHandles(), &r));
  handOut(r, request);
  return {};
}

// listen and connect: on a context (v11+) or the legacy one.
inline Status listenOn(CoreImpl& c, CoreContext* ctx, int dev, void* handle, void** listenComm) {
  CoreListen* l = nullptr;
  RESILIENT_TRY(c.listen(ctx, dev, static_cast<std::byte*>(handle), &l));
  handOut(l, listenComm);
  return {};
}

// NCCL's device-handle out-pointer (v7+; NULL for v6) as the seam carries
// it: whether there is one, and what it points at (NULL, or the handle NCCL
// allocated for an UNPACK receive, which the inner plugin fills in).
template <class DevHandle>
transport::DeviceHandleRequest deviceHandleRequest(DevHandle** devComm) {
  if (devComm == nullptr) {
    return false;
  }
  return transport::DeviceHandleRequest::pointingAt(
      reinterpret_cast<transport::DeviceHandle*>(*devComm));
}

// devComm: NCCL's device-handle out-pointer (v7+; may be NULL, and is NULL
// for v6): passed on to the inner transport as NCCL gave it, and what the
// inner transport wrote handed back.
template <class DevHandle>
Status connectOn(CoreImpl& c, CoreContext* ctx, int dev, void* handle, void** sendComm,
                 DevHandle** devComm) {
  *sendComm = nullptr;
  CoreComm* s = nullptr;
  RESILIENT_TRY(
      c.connect(ctx, dev, static_cast<std::byte*>(handle), deviceHandleRequest(devComm), &s));
  if (devComm != nullptr) {
    *devComm = s != nullptr ? reinterpret_cast<DevHandle*>(c.deviceHandle(*s)) : nullptr;
  }
  handOut(s, sendComm);
  return {};
}

inline ncclResult_t devices(int* ndev) noexcept {
  return onCore("devices", [&](CoreImpl& c) { return c.devices(ndev); });
}

// Props: the version's ncclNetProperties_vN_t.
template <class Props>
ncclResult_t getProperties(int dev, Props* props) noexcept {
  return onCore("getProperties", [&](CoreImpl& c) -> Status {
    transport::Properties p;
    RESILIENT_TRY(c.properties(dev, &p));
    fillProperties(p, dev, props);
    return {};
  });
}

// accept; devComm as connectOn's (NCCL allocates a handle for UNPACK
// receives only, src/transport/net.cc ncclNetGetDeviceHandle; else it
// points at NULL).
template <class DevHandle>
ncclResult_t accept(void* listenComm, void** recvComm, DevHandle** devComm) noexcept {
  return onCore("accept", [&](CoreImpl& c) -> Status {
    *recvComm = nullptr;
    CoreComm* comm = nullptr;
    RESILIENT_TRY(c.accept(*as<CoreListen>(listenComm), deviceHandleRequest(devComm), &comm));
    if (devComm != nullptr && comm != nullptr) {
      *devComm = reinterpret_cast<DevHandle*>(c.deviceHandle(*comm));
    }
    handOut(comm, recvComm);
    return {};
  });
}

// regMr of v8+ (size_t size).
inline ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return onCore("regMr", [&](CoreImpl& c) -> Status {
    CoreRegion* region = nullptr;
    RESILIENT_TRY(c.regMr(*as<CoreComm>(comm), static_cast<std::byte*>(data), size, type, &region));
    handOut(region, mhandle);
    return {};
  });
}

inline ncclResult_t deregMr(void* comm, void* mhandle) noexcept {
  return onCore("deregMr",
                [&](CoreImpl& c) { return c.deregMr(*as<CoreComm>(comm), as<CoreRegion>(mhandle)); });
}

inline ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                           void** request) noexcept {
  return onCore("iflush", [&](CoreImpl& c) -> Status {
    *request = nullptr;
    Pieces p;
    if (!p.fill(n, data, mhandles, nullptr)) {
      return internalError("iflush: more pieces than NCCL can group");
    }
    CoreRequest* r = nullptr;
    RESILIENT_TRY(c.iflush(*as<CoreComm>(recvComm), n, p.data.data(), sizes, p.regions.data(), &r));
    handOut(r, request);
    return {};
  });
}

inline ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  return onCore("test", [&](CoreImpl& c) { return c.test(*as<CoreRequest>(request), done, sizes); });
}

inline ncclResult_t closeSend(void* sendComm) noexcept {
  return onCore("closeSend", [&](CoreImpl& c) { return c.closeSend(as<CoreComm>(sendComm)); });
}

inline ncclResult_t closeRecv(void* recvComm) noexcept {
  return onCore("closeRecv", [&](CoreImpl& c) { return c.closeRecv(as<CoreComm>(recvComm)); });
}

inline ncclResult_t closeListen(void* listenComm) noexcept {
  return onCore("closeListen", [&](CoreImpl& c) { return c.closeListen(as<CoreListen>(listenComm)); });
}

}  // namespace resilient::abi::shared
