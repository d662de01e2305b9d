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

  // What NCCL holds between calls (see Core): here the inner transport's own
  // objects, unwrapped, but for the context, which is never NULL (NCCL's
  // finalize(NULL) means "init failed") while the inner one may be.
  using ContextHandle = CommContext;
  using ListenHandle = transport::Listener;
  // A send or a receive comm, as their common base (NCCL's regMr and deregMr
  // take either): isend and irecv get back the SendComm or RecvComm it is.
  using CommHandle = transport::Comm;
  using RequestHandle = transport::Request;
  using RegionHandle = transport::MemoryRegion;

  Status initContext(uint64_t commId, const transport::CommConfig& config, CommContext** ctx);
  Status finalizeContext(CommContext* ctx);
  Status devices(int* ndev) { return inner_->devices(ndev); }
  Status properties(int dev, transport::Properties* props) {
    return inner_->properties(dev, props);
  }
  Status listen(CommContext* ctx, int dev, std::byte* handle, transport::Listener** listener);
  Status connect(CommContext* ctx, int dev, std::byte* handle,
                 transport::DeviceHandleRequest wantDeviceHandle, transport::Comm** sendComm);
  Status accept(transport::Listener& listener, transport::DeviceHandleRequest wantDeviceHandle,
                transport::Comm** recvComm);
  Status regMr(transport::Comm& comm, std::byte* data, size_t size, int type,
               transport::MemoryRegion** region);
  Status deregMr(transport::Comm& comm, transport::MemoryRegion* region) {
    return comm.deregMr(std::unique_ptr<transport::MemoryRegion>(region));
  }
  Status isend(transport::Comm& comm, std::byte* data, size_t size, int tag,
               transport::MemoryRegion* region, transport::ProfilerHandle* phandle,
               transport::Request** request) {
    return static_cast<transport::SendComm&>(comm).isend(data, size, tag, region, phandle,
                                                         request);
  }
  Status irecv(transport::Comm& comm, int n, std::byte** data, const size_t* sizes,
               const int* tags, transport::MemoryRegion** regions,
               transport::ProfilerHandle** phandles, transport::Request** request) {
    return static_cast<transport::RecvComm&>(comm).irecv(n, data, sizes, tags, regions, phandles,
                                                         request);
  }
  Status iflush(transport::Comm& comm, int n, std::byte** data, const int* sizes,
                transport::MemoryRegion** regions, transport::Request** request) {
    return static_cast<transport::RecvComm&>(comm).iflush(n, data, sizes, regions, request);
  }
  Status test(transport::Request& request, int* done, int* sizes) {
    return request.test(done, sizes);
  }
  // The optional calls, as Core has them: the inner transport's own.
  transport::Capabilities capabilities() const noexcept { return inner_->capabilities(); }
  transport::DeviceHandle* deviceHandle(transport::Comm& comm) const noexcept {
    return comm.deviceHandle();
  }
  Status regMrDmaBuf(transport::Comm& comm, std::byte* data, size_t size, int type,
                     uint64_t offset, int fd, transport::MemoryRegion** region);
  Status getDeviceMr(transport::Comm& comm, transport::MemoryRegion* region,
                     transport::DeviceRegion** deviceRegion) {
    return comm.getDeviceMr(region, deviceRegion);
  }
  Status irecvConsumed(transport::Comm& comm, int n, transport::Request* request) {
    return static_cast<transport::RecvComm&>(comm).irecvConsumed(n, request);
  }
  Status makeVDevice(const transport::VirtualDevice& props, int* dev) {
    return inner_->makeVDevice(props, dev);
  }
  Status setNetAttr(CommContext* ctx, transport::NetAttributes* attr) {
    return inner_->setNetAttr(innerContext(ctx), attr);
  }
  Status closeSend(transport::Comm* comm) { return closeOwned(comm); }
  Status closeRecv(transport::Comm* comm) { return closeOwned(comm); }
  Status closeListen(transport::Listener* listener) { return closeOwned(listener); }

 private:
  explicit PlainCore(std::unique_ptr<transport::Transport> inner) : inner_(std::move(inner)) {}
  static transport::Context* innerContext(CommContext* ctx) noexcept {
    return ctx != nullptr ? ctx->inner.get() : nullptr;
  }
  template <class T>
  static Status closeOwned(T* object) {
    std::unique_ptr<T> owned(object);
    return owned->close();
  }
  std::unique_ptr<transport::Transport> inner_;
  int refs_ = 0;
};

}  // namespace resilient::net
