// Calls shared by the adapters of the versions without per-communicator
// contexts (v6–v10): they differ only in argument widths and in which of
// these they list. Each is a thin conversion onto the core.
#pragma once

#include "plugin/abi/adapter.h"

namespace resilient::abi::legacy {

inline ncclResult_t devices(int* ndev) noexcept {
  return onCore("devices", [&](CoreImpl& c) { return c.devices(ndev); });
}

inline ncclResult_t listen(int dev, void* handle, void** listenComm) noexcept {
  return onCore("listen",
                [&](CoreImpl& c) { return c.listen(legacyContext(), dev, handle, listenComm); });
}

inline ncclResult_t connect(int dev, void* handle, void** sendComm) noexcept {
  return onCore("connect",
                [&](CoreImpl& c) { return c.connect(legacyContext(), dev, handle, sendComm); });
}

template <class DevHandle>
ncclResult_t connectDev(int dev, void* handle, void** sendComm, DevHandle** devComm) noexcept {
  if (devComm != nullptr) {
    *devComm = nullptr;
  }
  return connect(dev, handle, sendComm);
}

inline ncclResult_t accept(void* listenComm, void** recvComm) noexcept {
  return onCore("accept", [&](CoreImpl& c) { return c.accept(listenComm, recvComm); });
}

template <class DevHandle>
ncclResult_t acceptDev(void* listenComm, void** recvComm, DevHandle** devComm) noexcept {
  if (devComm != nullptr) {
    *devComm = nullptr;
  }
  return accept(listenComm, recvComm);
}

inline ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return onCore("regMr", [&](CoreImpl& c) { return c.regMr(comm, data, size, type, mhandle); });
}

inline ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) noexcept {
  return regMr(comm, data, static_cast<size_t>(size < 0 ? 0 : size), type, mhandle);
}

inline ncclResult_t deregMr(void* comm, void* mhandle) noexcept {
  return onCore("deregMr", [&](CoreImpl& c) { return c.deregMr(comm, mhandle); });
}

inline ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                          void** request) noexcept {
  return onCore("isend", [&](CoreImpl& c) {
    return c.isend(sendComm, data, size, tag, mhandle, nullptr, request);
  });
}

inline ncclResult_t isendInt(void* sendComm, void* data, int size, int tag, void* mhandle,
                             void** request) noexcept {
  return isend(sendComm, data, static_cast<size_t>(size < 0 ? 0 : size), tag, mhandle, request);
}

inline ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                          void** mhandles, void** request) noexcept {
  return onCore("irecv", [&](CoreImpl& c) {
    return c.irecv(recvComm, n, data, sizes, tags, mhandles, nullptr, request);
  });
}

inline ncclResult_t irecvInt(void* recvComm, int n, void** data, int* sizes, int* tags,
                             void** mhandles, void** request) noexcept {
  if (request != nullptr) {
    *request = nullptr;
  }
  WideSizes wide;
  if (!wide.fill(n, sizes)) {
    return ncclInternalError;
  }
  return irecv(recvComm, n, data, wide.values.data(), tags, mhandles, request);
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

// Properties of v9/v10 (v11 adds maxMultiRequestSize), v8, v7 and v6.
template <class Props>
ncclResult_t properties(int dev, Props* props,
                        void (*extra)(const transport::Properties&, int, Props*)) noexcept {
  return onCore("getProperties", [&](CoreImpl& c) -> Status {
    transport::Properties p;
    RESILIENT_TRY(c.properties(dev, &p));
    *props = Props{};
    fillCommonProperties(p, props);
    extra(p, dev, props);
    return {};
  });
}

}  // namespace resilient::abi::legacy
