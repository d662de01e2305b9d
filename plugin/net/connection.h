// One send or receive comm of the resilient layer: the inner transport's
// comm (owned), who is at the other end, the counters the watchdog reads, the sticky
// fault, and a fixed pool of request wrappers (no allocation per request).
//
// Threads: the data path (isend/irecv/test) runs on one NCCL proxy thread per
// comm and owns the pool; the watchdog thread only reads the atomics and may
// publish a fault. Publishing is a single CAS, so the first fault wins. The
// counters have that one writer, so the data path updates them with plain
// relaxed loads and stores (no locked instructions) and reads no clock: the
// watchdog's progress monitor stamps progress when it sees the counters move
// (ProgressMonitor::observe).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/net/fault.h"
#include "plugin/net/introduction.h"
#include "plugin/transport/collnet.h"
#include "plugin/transport/request_pool.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

class ConnectionRecord;
namespace liveness {
struct PeerLink;
}

struct RequestRecord {
  ConnectionRecord* conn = nullptr;
  transport::Request* inner = nullptr;
  uint64_t bytes = 0;  // posted bytes (send size, or the sum of receive sizes)
  // A receive of a comm whose inner transport has irecvConsumed: after test()
  // said done it stays out of the pool until Core::irecvConsumed.
  bool heldUntilConsumed = false;
};

// The transport-level addresses of a connection (the peer process's host
// and pid come from its liveness link, see liveness::describePeer).
struct PeerIdentity {
  transport::Endpoint local;
  transport::Endpoint peer;
};

class ConnectionRecord {
 public:
  enum class Direction {
    kSend,  // a send comm (connect)
    kRecv,  // a receive comm (accept)
    kColl,  // a CollNet comm over all the communicator's ranks (collnet connect)
  };

  ConnectionRecord(uint64_t commId, std::unique_ptr<transport::SendComm> inner, int poolSize);
  // consumes: the inner transport has irecvConsumed (completed receives are
  // held until NCCL's irecvConsumed).
  ConnectionRecord(uint64_t commId, std::unique_ptr<transport::RecvComm> inner, int poolSize,
                   bool consumes = false);
  ConnectionRecord(uint64_t commId, std::unique_ptr<transport::CollComm> inner, int poolSize);
  ConnectionRecord(const ConnectionRecord&) = delete;
  ConnectionRecord& operator=(const ConnectionRecord&) = delete;

  Direction direction() const noexcept { return dir_; }
  const char* directionName() const noexcept {
    return dir_ == Direction::kSend ? "send" : dir_ == Direction::kRecv ? "recv" : "CollNet";
  }
  uint64_t commId() const noexcept { return commId_; }
  bool consumes() const noexcept { return consumes_; }
  transport::Comm& inner() const noexcept {
    if (send_ != nullptr) {
      return *send_;
    }
    return recv_ != nullptr ? static_cast<transport::Comm&>(*recv_) : *coll_;
  }
  // The inner comm as what it is: non-null for its direction only.
  transport::SendComm* sendComm() const noexcept { return send_.get(); }
  transport::RecvComm* recvComm() const noexcept { return recv_.get(); }
  transport::CollComm* collComm() const noexcept { return coll_.get(); }

  // Data path (owning thread only).
  RequestRecord* acquire() noexcept;
  void release(RequestRecord* r) noexcept;
  void onPosted(uint64_t bytes) noexcept;
  void onCompleted(uint64_t bytes) noexcept;

  // Read from any thread.
  int outstanding() const noexcept { return outstanding_.load(std::memory_order_relaxed); }
  uint64_t outstandingBytes() const noexcept {
    return outstandingBytes_.load(std::memory_order_relaxed);
  }
  uint64_t completedRequests() const noexcept { return completed_.load(std::memory_order_relaxed); }
  uint64_t bytesCompleted() const noexcept { return bytesDone_.load(std::memory_order_relaxed); }
  uint64_t lastProgressNs() const noexcept {
    return lastProgressNs_.load(std::memory_order_relaxed);
  }
  void noteProgress(uint64_t nowNs) noexcept {
    lastProgressNs_.store(nowNs, std::memory_order_relaxed);
  }

  // The sticky fault: nullptr while healthy. Two steps, so that the fault is
  // explained (logged) before any caller can see it: claimFault() is true for
  // exactly one thread, which then publishes the record.
  const FaultRecord* fault() const noexcept { return fault_.load(std::memory_order_acquire); }
  bool claimFault() noexcept { return !faultClaimed_.exchange(true, std::memory_order_acq_rel); }
  void publishFault(std::unique_ptr<FaultRecord> record) noexcept;

  PeerIdentity identity;  // written at setup, read-only afterwards
  // The liveness channel's link to the peer process, once known.
  std::atomic<liveness::PeerLink*> link{nullptr};
  // The progress monitor's readings at its last look at the connection busy
  // (watchdog thread only): the inner transport's bytesMoved() and completed
  // requests.
  uint64_t progressBytesSeen = 0;
  uint64_t progressCompletedSeen = 0;
  int blackboxSlot = -1;  // its slot in the blackbox (watchdog only)
  // How long the link was busy (watchdog only; the blackbox's busyNs),
  // sampled at each tick: the interval since the previous tick counts when
  // the link is busy at this one (Watchdog::sampleBusy).
  uint64_t busyNs = 0;
  uint64_t busySampledNs = 0;  // the previous tick; 0 before the first
  uint64_t busyBytesSeen = 0;  // bytesCompleted() then
  bool backlogged = false;     // busy then
  // The blackbox's abort epoch when the connection was made (written once,
  // before the connection is published; see Core::fail).
  uint32_t abortEpoch = 0;
  // Set when the connection introduces itself in band (no trailer in the
  // listen handle); advanced by the data path.
  std::unique_ptr<Introduction> introduction;

 private:
  ConnectionRecord(Direction dir, uint64_t commId, int poolSize, bool consumes);

  const Direction dir_;
  const uint64_t commId_;
  const bool consumes_ = false;
  std::unique_ptr<transport::SendComm> send_;  // one of the three, by direction
  std::unique_ptr<transport::RecvComm> recv_;
  std::unique_ptr<transport::CollComm> coll_;
  transport::RequestPool<RequestRecord> pool_;
  std::atomic<int> outstanding_{0};
  std::atomic<uint64_t> outstandingBytes_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> bytesDone_{0};
  std::atomic<uint64_t> lastProgressNs_{0};
  std::atomic<bool> faultClaimed_{false};
  std::atomic<const FaultRecord*> fault_{nullptr};
  std::unique_ptr<const FaultRecord> faultOwner_;
};

}  // namespace resilient::net
