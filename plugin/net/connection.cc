#include "plugin/net/connection.h"

namespace resilient::net {

Connection::Connection(Direction dir, uint64_t commId, void* inner, int poolSize)
    : dir_(dir), commId_(commId), inner_(inner), pool_(static_cast<size_t>(poolSize)) {
  for (auto it = pool_.rbegin(); it != pool_.rend(); ++it) {
    it->conn = this;
    it->nextFree = free_;
    free_ = &*it;
  }
}

Request* Connection::acquire() noexcept {
  Request* r = free_;
  if (r != nullptr) {
    free_ = r->nextFree;
    r->nextFree = nullptr;
  }
  return r;
}

void Connection::release(Request* r) noexcept {
  r->inner = nullptr;
  r->nextFree = free_;
  free_ = r;
}

void Connection::onPosted(uint64_t bytes, uint64_t nowNs) noexcept {
  if (outstanding_.fetch_add(1, std::memory_order_relaxed) == 0) {
    busySinceNs_.store(nowNs, std::memory_order_relaxed);
    lastProgressNs_.store(nowNs, std::memory_order_relaxed);
  }
  outstandingBytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void Connection::onCompleted(uint64_t bytes, uint64_t nowNs) noexcept {
  outstandingBytes_.fetch_sub(bytes, std::memory_order_relaxed);
  bytesDone_.fetch_add(bytes, std::memory_order_relaxed);
  completed_.fetch_add(1, std::memory_order_relaxed);
  lastProgressNs_.store(nowNs, std::memory_order_relaxed);
  if (outstanding_.fetch_sub(1, std::memory_order_relaxed) == 1) {
    busySinceNs_.store(0, std::memory_order_relaxed);
  } else {
    busySinceNs_.store(nowNs, std::memory_order_relaxed);
  }
}

void Connection::publishFault(std::unique_ptr<FaultRecord> record) noexcept {
  faultOwner_ = std::move(record);
  fault_.store(faultOwner_.get(), std::memory_order_release);
}

}  // namespace resilient::net
