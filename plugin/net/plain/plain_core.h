// The core of libnccl-net-tcp-plain.so: our TCP transport exposed to NCCL
// directly, without the resilient layer (no connection records, no watchdog,
// no fault handling beyond the transport's own). It exists as the baseline
// the resilient layer's overhead is measured against, and as a plain plugin
// for tools such as resilient-nettest. Same interface as Core, so the same
// per-version adapters serve both libraries.
#pragma once

#include <memory>

#include "nccl/log.h"
#include "common/status.h"
#include "plugin/net/core.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

class PlainCore {
 public:
  static PlainCore* acquire(const SelfIdentity& self, ncclDebugLogger_t logger, Status* error);
  static void releaseRef(PlainCore* core);
  static PlainCore* live() noexcept;

  // Contexts are never NULL (NCCL's finalize(NULL) means "init failed"), so the
  // inner transport's context, which may be NULL, is wrapped.
  Status initContext(uint64_t commId, const transport::CommConfig& config, void** ctx);
  Status finalizeContext(void* ctx);
  Status devices(int* ndev) { return inner_->devices(ndev); }
  Status properties(int dev, transport::Properties* props) {
    return inner_->properties(dev, props);
  }
  Status listen(void* ctx, int dev, void* handle, void** listenComm) {
    return inner_->listen(innerContext(ctx), dev, handle, listenComm);
  }
  Status connect(void* ctx, int dev, void* handle, void** sendComm) {
    return inner_->connect(innerContext(ctx), dev, handle, sendComm);
  }
  Status accept(void* listenComm, void** recvComm) { return inner_->accept(listenComm, recvComm); }
  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
    return inner_->regMr(comm, data, size, type, mhandle);
  }
  Status deregMr(void* comm, void* mhandle) { return inner_->deregMr(comm, mhandle); }
  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) {
    return inner_->isend(sendComm, data, size, tag, mhandle, phandle, request);
  }
  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) {
    return inner_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  }
  Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                void** request) {
    return inner_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  Status test(void* request, int* done, int* sizes) { return inner_->test(request, done, sizes); }
  Status closeSend(void* sendComm) { return inner_->closeSend(sendComm); }
  Status closeRecv(void* recvComm) { return inner_->closeRecv(recvComm); }
  Status closeListen(void* listenComm) { return inner_->closeListen(listenComm); }

 private:
  explicit PlainCore(std::unique_ptr<transport::Transport> inner) : inner_(std::move(inner)) {}
  static void* innerContext(void* ctx) noexcept;
  std::unique_ptr<transport::Transport> inner_;
  int refs_ = 0;
};

}  // namespace resilient::net
