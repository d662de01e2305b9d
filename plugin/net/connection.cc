#include "plugin/net/connection.h"

namespace resilient::net {

ConnectionRecord::ConnectionRecord(Direction dir, uint64_t commId, int poolSize, bool consumes)
    : dir_(dir), commId_(commId), consumes_(consumes), pool_(static_cast<size_t>(poolSize)) {
  for (RequestRecord& r : pool_.slots()) {
    r.conn = this;
  }
}

ConnectionRecord::ConnectionRecord(uint64_t commId, std::unique_ptr<transport::SendComm> inner,
                                   int poolSize)
    : ConnectionRecord(Direction::kSend, commId, poolSize, false) {
  send_ = std::move(inner);
}

ConnectionRecord::ConnectionRecord(uint64_t commId, std::unique_ptr<transport::RecvComm> inner,
                                   int poolSize, bool consumes)
    : ConnectionRecord(Direction::kRecv, commId, poolSize, consumes) {
  recv_ = std::move(inner);
}

ConnectionRecord::ConnectionRecord(uint64_t commId, std::unique_ptr<transport::CollComm> inner,
                                   int poolSize)
    : ConnectionRecord(Direction::kColl, commId, poolSize, false) {
  coll_ = std::move(inner);
}

RequestRecord* ConnectionRecord::acquire() noexcept {
  return pool_.acquire();
}

void ConnectionRecord::release(RequestRecord* r) noexcept {
  r->inner = nullptr;
  r->heldUntilConsumed = false;
  pool_.release(r);
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
