#include "plugin/net/plain/plain_core.h"

#include <atomic>
#include <mutex>

#include "common/log.h"
#include "common/params.h"
#include "plugin/net/inner_factory.h"
#include "plugin/transport/tcp/tcp_transport.h"

namespace resilient::net {
namespace {

std::mutex gMutex;
PlainCore* gCore = nullptr;
std::atomic<PlainCore*> gLive{nullptr};

}  // namespace

PlainCore* PlainCore::acquire(const SelfIdentity& /*self*/, ncclDebugLogger_t logger,
                              Status* /*error*/) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (logger != nullptr) {
    log::setNcclLogger(logger);
  }
  if (gCore == nullptr) {
    gCore = new PlainCore(
        std::make_unique<transport::tcp::TcpTransport>(tcpOptionsFrom(config::Params::global())));
    gLive.store(gCore, std::memory_order_release);
  }
  ++gCore->refs_;
  return gCore;
}

void PlainCore::releaseRef(PlainCore* core) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (core == nullptr || core != gCore || --core->refs_ > 0) {
    return;
  }
  gLive.store(nullptr, std::memory_order_release);
  delete core;
  gCore = nullptr;
}

PlainCore* PlainCore::live() noexcept {
  return gLive.load(std::memory_order_acquire);
}

Status PlainCore::initContext(uint64_t commId, const transport::CommConfig& config,
                              CommContext** ctx) {
  auto c = std::make_unique<CommContext>();
  c->commId = commId;
  RESILIENT_TRY(inner_->initContext(commId, config, &c->inner));
  *ctx = c.release();
  return {};
}

Status PlainCore::finalizeContext(CommContext* ctx) {
  std::unique_ptr<CommContext> c(ctx);
  return c != nullptr && c->inner != nullptr ? c->inner->finalize() : Status();
}

Status PlainCore::listen(CommContext* ctx, int dev, std::byte* handle,
                         transport::Listener** listener) {
  std::unique_ptr<transport::Listener> l;
  RESILIENT_TRY(inner_->listen(innerContext(ctx), dev, handle, &l));
  *listener = l.release();
  return {};
}

Status PlainCore::connect(CommContext* ctx, int dev, std::byte* handle,
                          transport::DeviceHandleRequest wantDeviceHandle,
                          transport::Comm** sendComm) {
  std::unique_ptr<transport::SendComm> c;
  RESILIENT_TRY(inner_->connect(innerContext(ctx), dev, handle, wantDeviceHandle, &c));
  *sendComm = c.release();
  return {};
}

Status PlainCore::accept(transport::Listener& listener,
                         transport::DeviceHandleRequest wantDeviceHandle,
                         transport::Comm** recvComm) {
  std::unique_ptr<transport::RecvComm> c;
  RESILIENT_TRY(listener.accept(wantDeviceHandle, &c));
  *recvComm = c.release();
  return {};
}

Status PlainCore::regMr(transport::Comm& comm, std::byte* data, size_t size, int type,
                        transport::MemoryRegion** region) {
  std::unique_ptr<transport::MemoryRegion> r;
  RESILIENT_TRY(comm.regMr(data, size, type, &r));
  *region = r.release();
  return {};
}

Status PlainCore::regMrDmaBuf(transport::Comm& comm, std::byte* data, size_t size, int type,
                              uint64_t offset, int fd, transport::MemoryRegion** region) {
  std::unique_ptr<transport::MemoryRegion> r;
  RESILIENT_TRY(comm.regMrDmaBuf(data, size, type, offset, fd, &r));
  *region = r.release();
  return {};
}

}  // namespace resilient::net
