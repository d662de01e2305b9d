// The resilient layer over the inner transport's CollNet (core.h, "CollNet").
//
// A collective comm is a ConnectionRecord of direction kColl: its requests
// come from the record's fixed pool (no allocation or lock on the data
// path), its counters are those of every connection, and the watchdog
// watches it (Watchdog::add): its progress monitor fails a comm with
// collectives outstanding and none completing for
// NCCL_RESILIENT_PROGRESS_TIMEOUT_MS. A CollNet comm has no liveness link:
// NCCL gives it no single peer (src/transport/coll_net.cc, sharedConnect).
// An error of the inner CollNet goes through failTransport: one WARN naming
// the call, the communicator, rank/nranks and the inner error, and a sticky
// error for every later call on the comm. Results (test sizes,
// reduceSupport, properties) are the inner CollNet's, unchanged.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "common/log.h"
#include "plugin/net/core.h"

namespace resilient::net {
namespace {

// Collectives per comm: NCCL keeps at most NCCL_STEPS collectives and their
// flushes out per CollNet comm (src/transport/coll_net.cc,
// send/recvProxyProgress); the pool is as large as the net's receive side.
constexpr int kCollPool = 2 * transport::kMaxRequests;

transport::CollNet& collNetOf(transport::Transport& inner) {
  return *inner.collNet();  // callers checked Core::collNet()
}

Status noCollNet(const char* call) {
  return invalidUsage(std::string(call) + ": the inner transport has no CollNet");
}

}  // namespace

Status Core::collInitContext(uint64_t commId, CommContext** ctx) {
  *ctx = nullptr;
  if (collNet() == nullptr) {
    return noCollNet("init");
  }
  auto c = std::make_unique<CommContext>();
  c->commId = commId;
  RESILIENT_TRY(collNetOf(*inner_).initContext(commId, &c->inner));
  *ctx = c.release();
  return {};
}

Status Core::collLegacyContext(CommContext** ctx) {
  std::lock_guard<std::mutex> lock(collLegacyMutex_);
  if (collLegacy_ == nullptr) {
    CommContext* c = nullptr;
    RESILIENT_TRY(collInitContext(0, &c));  // NCCL's adapters pass no communicator
    collLegacy_.reset(c);
  }
  *ctx = collLegacy_.get();
  return {};
}

Status Core::reduceSupport(transport::Reduction op, int* supported) {
  *supported = 0;
  if (collNet() == nullptr) {
    return noCollNet("reduceSupport");
  }
  return collNetOf(*inner_).reduceSupport(op, supported);
}

Status Core::collListen(CommContext* ctx, int dev, std::byte* handle, CollListenRecord** listener) {
  *listener = nullptr;
  if (collNet() == nullptr) {
    return noCollNet("listen");
  }
  auto l = std::make_unique<CollListenRecord>();
  l->commId = ctx != nullptr ? ctx->commId : 0;
  l->dev = dev;
  RESILIENT_TRY(collNetOf(*inner_).listen(ctx != nullptr ? ctx->inner.get() : nullptr, dev, handle,
                                          &l->inner));
  *listener = l.release();
  return {};
}

Status Core::collConnect(std::byte* const* handles, int nranks, int rank,
                         CollListenRecord& listener, ConnectionRecord** comm) {
  *comm = nullptr;
  if (collNet() == nullptr) {
    return noCollNet("connect");
  }
  std::unique_ptr<transport::CollComm> inner;
  RESILIENT_TRY(collNetOf(*inner_).connect(handles, nranks, rank, *listener.inner, &inner));
  if (inner == nullptr) {
    return {};  // no CollNet for this communicator: NCCL checks it across ranks
  }
  auto c = std::make_unique<ConnectionRecord>(listener.commId, std::move(inner), kCollPool);
  // What the fault messages name (NCCL gives a CollNet comm no single peer).
  snprintf(c->identity.local.text, sizeof c->identity.local.text, "rank %d/%d device %d", rank,
           nranks, listener.dev);
  snprintf(c->identity.peer.text, sizeof c->identity.peer.text, "CollNet %s of %d ranks",
           collNetOf(*inner_).name(), nranks);
  if (blackbox_ != nullptr) {
    c->abortEpoch = blackbox_->abortEpoch();
  }
  watchdog_->add(c.get());
  *comm = c.release();
  return {};
}

template <class Post>
Status Core::postCollective(ConnectionRecord& c, uint64_t bytes, const char* call,
                            RequestRecord** request, Post post) {
  *request = nullptr;
  RESILIENT_TRY(checkUsable(c));
  RequestRecord* r = c.acquire();
  if (r == nullptr) {
    return {};  // NCCL retries later
  }
  transport::Request* innerReq = nullptr;
  const Status s = post(&innerReq);
  if (!s.ok() || innerReq == nullptr) {
    c.release(r);
    return s.ok() ? s : failTransport(c, s, call);
  }
  r->inner = innerReq;
  r->bytes = bytes;
  c.onPosted(bytes);
  *request = r;
  return {};
}

Status Core::iallreduce(ConnectionRecord& c, std::byte* send, std::byte* recv, size_t count,
                        transport::Reduction op, transport::MemoryRegion* sendRegion,
                        transport::MemoryRegion* recvRegion, RequestRecord** request) {
  return postCollective(c, 0, "iallreduce", request, [&](transport::Request** innerReq) {
    return c.collComm()->iallreduce(send, recv, count, op, sendRegion, recvRegion, innerReq);
  });
}

Status Core::iallgather(ConnectionRecord& c, std::byte* send, int nRecvParts,
                        const transport::CollPiece* recvParts, transport::CollWindow window,
                        transport::MemoryRegion* sendRegion, RequestRecord** request) {
  return postCollective(c, window.bytes, "iallgather", request, [&](transport::Request** innerReq) {
    return c.collComm()->iallgather(send, nRecvParts, recvParts, window, sendRegion, innerReq);
  });
}

Status Core::ireducescatter(ConnectionRecord& c, int nSendParts,
                            const transport::CollPiece* sendParts, std::byte* recv,
                            transport::CollWindow window, transport::Reduction op,
                            transport::MemoryRegion* recvRegion, RequestRecord** request) {
  return postCollective(
      c, window.bytes, "ireducescatter", request, [&](transport::Request** innerReq) {
        return c.collComm()->ireducescatter(nSendParts, sendParts, recv, window, op, recvRegion,
                                            innerReq);
      });
}

Status Core::collIflush(ConnectionRecord& c, std::byte* data, int size,
                        transport::MemoryRegion* region, RequestRecord** request) {
  return postCollective(c, 0, "iflush", request, [&](transport::Request** innerReq) {
    return c.collComm()->iflush(data, size, region, innerReq);
  });
}

Status Core::closeColl(ConnectionRecord* comm) {
  return close(std::unique_ptr<ConnectionRecord>(comm));
}

Status Core::collCloseListen(CollListenRecord* listener) {
  std::unique_ptr<CollListenRecord> l(listener);
  return l->inner->close();
}

}  // namespace resilient::net
