// Calls whose C signature is the same in several net ABI versions, each a
// thin conversion onto the core: the adapters list them in their structs.
// The calls of the versions without per-communicator contexts (v6–v10) are
// in legacy_calls.h.
#pragma once

#include "plugin/net/abi/adapter.h"

namespace resilient::abi::shared {

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

// accept of v7+: a host plugin leaves the device handle NULL.
template <class DevHandle>
ncclResult_t accept(void* listenComm, void** recvComm, DevHandle** devComm) noexcept {
  if (devComm != nullptr) {
    *devComm = nullptr;
  }
  return onCore("accept", [&](CoreImpl& c) { return c.accept(listenComm, recvComm); });
}

// regMr of v8+ (size_t size).
inline ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return onCore("regMr", [&](CoreImpl& c) { return c.regMr(comm, data, size, type, mhandle); });
}

inline ncclResult_t deregMr(void* comm, void* mhandle) noexcept {
  return onCore("deregMr", [&](CoreImpl& c) { return c.deregMr(comm, mhandle); });
}

inline ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                           void** request) noexcept {
  return onCore("iflush",
                [&](CoreImpl& c) { return c.iflush(recvComm, n, data, sizes, mhandles, request); });
}

inline ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  return onCore("test", [&](CoreImpl& c) { return c.test(request, done, sizes); });
}

inline ncclResult_t closeSend(void* sendComm) noexcept {
  return onCore("closeSend", [&](CoreImpl& c) { return c.closeSend(sendComm); });
}

inline ncclResult_t closeRecv(void* recvComm) noexcept {
  return onCore("closeRecv", [&](CoreImpl& c) { return c.closeRecv(recvComm); });
}

inline ncclResult_t closeListen(void* listenComm) noexcept {
  return onCore("closeListen", [&](CoreImpl& c) { return c.closeListen(listenComm); });
}

}  // namespace resilient::abi::shared
