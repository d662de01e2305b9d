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

namespace {
struct PlainContext {
  void* inner = nullptr;
};
}  // namespace

Status PlainCore::initContext(uint64_t commId, const transport::CommConfig& config, void** ctx) {
  auto c = std::make_unique<PlainContext>();
  RESILIENT_TRY(inner_->initContext(commId, config, &c->inner));
  *ctx = c.release();
  return {};
}

Status PlainCore::finalizeContext(void* ctx) {
  std::unique_ptr<PlainContext> c(static_cast<PlainContext*>(ctx));
  return c != nullptr ? inner_->finalizeContext(c->inner) : Status();
}

void* PlainCore::innerContext(void* ctx) noexcept {
  return ctx != nullptr ? static_cast<PlainContext*>(ctx)->inner : nullptr;
}

}  // namespace resilient::net
