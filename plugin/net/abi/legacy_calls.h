// Calls of the versions without per-communicator contexts (v6–v10): listen
// and connect on the process-wide legacy context, no profiler handles, and
// the int-sized variants of v6–v8. Each is a thin conversion onto the core.
#pragma once

#include <array>
#include <cstddef>

#include "plugin/net/abi/adapter.h"
#include "plugin/net/abi/shared_calls.h"

namespace resilient::abi::legacy {

inline ncclResult_t listen(int dev, void* handle, void** listenComm) noexcept {
  return onCore("listen", [&](CoreImpl& c) {
    return shared::listenOn(c, legacyContext(), dev, handle, listenComm);
  });
}

// connect of v7–v10, with the device handle passed through.
template <class DevHandle>
ncclResult_t connectDev(int dev, void* handle, void** sendComm, DevHandle** devComm) noexcept {
  return onCore("connect", [&](CoreImpl& c) {
    return shared::connectOn(c, legacyContext(), dev, handle, sendComm, devComm);
  });
}

// connect and accept of v6 (no device handle).
inline ncclResult_t connect(int dev, void* handle, void** sendComm) noexcept {
  return connectDev<void>(dev, handle, sendComm, nullptr);
}
inline ncclResult_t accept(void* listenComm, void** recvComm) noexcept {
  return shared::accept<void>(listenComm, recvComm, nullptr);
}

// regMr of v6–v7 (int size).
inline ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) noexcept {
  return shared::regMr(comm, data, static_cast<size_t>(size < 0 ? 0 : size), type, mhandle);
}

// isend/irecv of v9 (size_t sizes, no profiler handles).
inline ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                          void** request) noexcept {
  return onCore("isend", [&](CoreImpl& c) {
    return shared::postSend(c, sendComm, data, size, tag, mhandle, nullptr, request);
  });
}

inline ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                          void** mhandles, void** request) noexcept {
  return onCore("irecv", [&](CoreImpl& c) {
    return shared::postRecv(c, recvComm, n, data, sizes, tags, mhandles, nullptr, request);
  });
}

// NCCL's int receive sizes (v6–v8), widened for the core.
struct WideSizes {
  std::array<size_t, NCCL_PROXY_MAX_SUBS> values{};
  bool fill(int n, const int* sizes) {
    if (n < 0 || n > NCCL_PROXY_MAX_SUBS) {
      return false;
    }
    for (int i = 0; i < n; ++i) {
      values[static_cast<size_t>(i)] = static_cast<size_t>(sizes[i] < 0 ? 0 : sizes[i]);
    }
    return true;
  }
};

// isend/irecv of v6–v8 (int sizes).
inline ncclResult_t isendInt(void* sendComm, void* data, int size, int tag, void* mhandle,
                             void** request) noexcept {
  return isend(sendComm, data, static_cast<size_t>(size < 0 ? 0 : size), tag, mhandle, request);
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

}  // namespace resilient::abi::legacy
