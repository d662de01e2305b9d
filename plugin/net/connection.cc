#include "plugin/net/connection.h"

namespace resilient::net {

ConnectionRecord::ConnectionRecord(Direction dir, uint64_t commId, void* inner, int poolSize)
    : dir_(dir), commId_(commId), inner_(inner), pool_(static_cast<size_t>(poolSize)) {
  for (auto it = pool_.rbegin(); it != pool_.rend(); ++it) {
    it->conn = this;
    it->nextFree = free_;
    free_ = &*it;
  }
}

RequestRecord* ConnectionRecord::acquire() noexcept {
  RequestRecord* r = free_;
  if (r != nullptr) {
    free_ = r->nextFree;
    r->nextFree = nullptr;
  }
  return r;
}

void ConnectionRecord::release(RequestRecord* r) noexcept {
  r->inner = nullptr;
  r->nextFree = free_;
  free_ = r;
}

namespace {

// counter += delta by its only writer: no locked read-modify-write.
template <class T>
void add(std::atomic<T>& counter, T delta) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

}  // namespace

void ConnectionRecord::onPosted(uint64_t bytes) noexcept {
  add(outstandingBytes_, bytes);
  add(outstanding_, 1);
}

void ConnectionRecord::onCompleted(uint64_t bytes) noexcept {
  add(outstandingBytes_, uint64_t{0} - bytes);
  add(bytesDone_, bytes);
  add(completed_, uint64_t{1});
  add(outstanding_, -1);
}

void ConnectionRecord::publishFault(std::unique_ptr<FaultRecord> record) noexcept {
  faultOwner_ = std::move(record);
  fault_.store(faultOwner_.get(), std::memory_order_release);
}

}  // namespace resilient::net
