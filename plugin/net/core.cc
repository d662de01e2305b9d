#include "plugin/net/core.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "plugin/net/handle_trailer.h"
#include "plugin/net/inner_factory.h"
#include "plugin/net/inner_log.h"
#include "plugin/net/introduction.h"
#include "plugin/net/liveness/peer_link.h"
#include "plugin/net/watchdog.h"

namespace resilient::net {
namespace {

using config::Params;

// Global core; guarded by gMutex (control path only).
std::mutex gMutex;
Core* gCore = nullptr;
std::atomic<Core*> gLive{nullptr};  // == gCore, readable without the mutex

// Pool sizes: NCCL keeps at most kMaxRequests outstanding per comm; the sender
// side must allow kMaxRequests times the receiver's largest multi-receive. A
// receiver whose completed receives wait for irecvConsumed holds up to
// kMaxRequests of those besides the ones posted (src/transport/net.cc,
// recvProxyProgress).
constexpr int kRecvPool = transport::kMaxRequests;
constexpr int kConsumingRecvPool = 2 * transport::kMaxRequests;
constexpr int kSendPool = transport::kMaxRequests * transport::kMaxFusedDevices;

std::string describeEnds(const ConnectionRecord& conn) {
  std::string s = "local ";
  s += conn.identity.local.text[0] != '\0' ? conn.identity.local.text : "?";
  s += ", peer " + liveness::describePeer(conn);
  return s;
}

}  // namespace

Core* Core::acquire(const SelfIdentity& self, ncclDebugLogger_t logger, Status* error) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (logger != nullptr) {
    log::setNcclLogger(logger);
  }
  if (gCore == nullptr) {
    const Params& params = Params::global();
    auto setup = makeInnerSetup(params, self, logger);
    if (!setup.ok()) {
      *error = setup.status();
      RES_WARN(NCCL_NET | NCCL_INIT, "cannot initialise the inner transport: %s",
               setup.status().toString().c_str());
      return nullptr;
    }
    std::unique_ptr<blackbox::Writer> box;
    if (!setup->blackboxDir.empty()) {
      auto created = blackbox::Writer::create(setup->blackboxDir, setup->watchdog.hostName);
      if (created.ok()) {
        box = std::move(created).value();
      } else {
        RES_WARN(NCCL_NET | NCCL_INIT, "running without a blackbox: %s",
                 created.status().toString().c_str());
      }
    }
    gCore = new Core(std::move(setup->transport), setup->watchdog, std::move(box));
    gLive.store(gCore, std::memory_order_release);
    RES_INFO(NCCL_NET | NCCL_INIT, "wrapping inner transport %s", gCore->inner_->name());
  }
  ++gCore->refs_;
  return gCore;
}

void Core::releaseRef(Core* core) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (core == nullptr || core != gCore) {
    return;
  }
  if (--core->refs_ == 0) {
    gLive.store(nullptr, std::memory_order_release);
    delete core;
    gCore = nullptr;
  }
}

Core* Core::live() noexcept {
  return gLive.load(std::memory_order_acquire);
}

Core::Core(std::unique_ptr<transport::Transport> inner, const WatchdogOptions& watchdog,
           std::unique_ptr<blackbox::Writer> blackbox)
    : inner_(std::move(inner)),
      blackbox_(std::move(blackbox)),
      watchdog_(std::make_unique<Watchdog>(static_cast<FaultSink&>(*this), watchdog,
                                           blackbox_.get(), clock_)),
      hostName_(watchdog.hostName) {
  inner_log::attach(blackbox_.get());
}

void Core::describeLocalEnd(ConnectionRecord& conn, int dev) const noexcept {
  transport::Endpoint& local = conn.identity.local;
  if (local.text[0] == '\0') {
    snprintf(local.text, sizeof local.text, "%s pid %d device %d",
             hostName_.empty() ? "?" : hostName_.c_str(), static_cast<int>(getpid()), dev);
  }
}

Core::~Core() {
  watchdog_.reset();  // stops its thread before the transport and the blackbox go away
  collLegacy_.reset();  // before the CollNet it belongs to
  inner_.reset();
  inner_log::attach(nullptr);
  blackbox_.reset();  // a clean finish removes the region
}

Status Core::initContext(uint64_t commId, const transport::CommConfig& config,
                         CommContext** ctx) {
  auto c = std::make_unique<CommContext>();
  c->commId = commId;
  RESILIENT_TRY(inner_->initContext(commId, config, &c->inner));
  *ctx = c.release();
  return {};
}

Status Core::finalizeContext(CommContext* ctx) {
  std::unique_ptr<CommContext> c(ctx);
  if (c == nullptr || c->inner == nullptr) {
    return {};
  }
  return c->inner->finalize();
}

Status Core::devices(int* ndev) {
  return inner_->devices(ndev);
}

Status Core::properties(int dev, transport::Properties* props) {
  return inner_->properties(dev, props);
}

HandleTrailer Core::trailerFor(uint64_t key) {
  HandleTrailer trailer;
  if (!watchdog_->trailerFor(key, &trailer)) {
    trailer = HandleTrailer{};  // AF_UNSPEC: "no liveness channel here"
    trailer.listenNonce = key;
    trailer.pid = static_cast<uint32_t>(getpid());
  }
  return trailer;
}

bool Core::canIntroduceOn(int dev) {
  if (canIntroduce(*inner_, dev)) {
    return true;
  }
  if (!warnedNoIntroduction_.exchange(true)) {
    RES_WARN(NCCL_NET | NCCL_INIT,
             "inner transport %s fills the listen handle and takes no host memory: its "
             "connections run without a liveness channel (a dead or frozen peer is found by "
             "the progress timeout only)",
             inner_->name());
  }
  return false;
}

Status Core::listen(CommContext* ctx, int dev, std::byte* handle, ListenRecord** listener) {
  auto l = std::make_unique<ListenRecord>();
  l->commId = ctx != nullptr ? ctx->commId : 0;
  l->dev = dev;
  std::memset(handle, 0, transport::kHandleSize);
  RESILIENT_TRY(inner_->listen(ctx != nullptr ? ctx->inner.get() : nullptr, dev, handle, &l->inner));
  l->nonce = watchdog_->newListenNonce();
  if (!writeTrailer(handle, inner_->handleBytes(), trailerFor(l->nonce))) {
    // No room: each connection introduces itself in band instead.
    l->introduced = canIntroduceOn(dev);
    if (l->introduced && !infoIntroduction_.exchange(true)) {
      RES_INFO(NCCL_NET | NCCL_INIT,
               "inner transport %s fills the listen handle: connections introduce themselves "
               "to the liveness channel in band",
               inner_->name());
    }
  }
  *listener = l.release();
  return {};
}

Status Core::connect(CommContext* ctx, int dev, std::byte* handle,
                     transport::DeviceHandleRequest wantDeviceHandle, ConnectionRecord** sendComm) {
  *sendComm = nullptr;
  // Read before the inner connect: some plugins keep connect state in the handle.
  HandleTrailer trailer;
  const bool hasTrailer = readTrailer(handle, inner_->handleBytes(), &trailer);
  std::unique_ptr<transport::SendComm> innerComm;
  RESILIENT_TRY(inner_->connect(ctx != nullptr ? ctx->inner.get() : nullptr, dev, handle,
                                wantDeviceHandle, &innerComm));
  if (innerComm == nullptr) {
    return {};  // poll again
  }
  auto conn = std::make_unique<ConnectionRecord>(ctx != nullptr ? ctx->commId : 0,
                                                 std::move(innerComm), kSendPool);
  conn->inner().endpoints(&conn->identity.local, &conn->identity.peer);
  describeLocalEnd(*conn, dev);
  conn->abortEpoch = blackbox_ != nullptr ? blackbox_->abortEpoch() : 0;
  if (hasTrailer) {
    if (trailer.liveness.ss_family != AF_UNSPEC) {
      watchdog_->linkTo(*conn, trailer);
    }
  } else if (canIntroduceOn(dev)) {
    // The listener's handle had no room for its trailer: ours goes first on
    // the connection; the acceptor links back and binds this key (awaited
    // before the introduction can arrive).
    const HandleTrailer ours = trailerFor(watchdog_->newConnectionKey());
    if (ours.liveness.ss_family != AF_UNSPEC) {
      watchdog_->awaitLink(*conn, ours.listenNonce);
    }
    if (Status s = Introduction::start(*conn->sendComm(), ours, &conn->introduction); !s.ok()) {
      watchdog_->remove(conn.get());
      (void)conn->inner().close();
      return s;
    }
  }
  watchdog_->add(conn.get());
  *sendComm = conn.release();
  return {};
}

Status Core::accept(ListenRecord& l, transport::DeviceHandleRequest wantDeviceHandle,
                    ConnectionRecord** recvComm) {
  *recvComm = nullptr;
  std::unique_ptr<transport::RecvComm> innerComm;
  RESILIENT_TRY(l.inner->accept(wantDeviceHandle, &innerComm));
  if (innerComm == nullptr) {
    return {};
  }
  const bool consumes = inner_->capabilities().irecvConsumed;
  auto conn = std::make_unique<ConnectionRecord>(
      l.commId, std::move(innerComm), consumes ? kConsumingRecvPool : kRecvPool, consumes);
  conn->inner().endpoints(&conn->identity.local, &conn->identity.peer);
  describeLocalEnd(*conn, l.dev);
  conn->abortEpoch = blackbox_ != nullptr ? blackbox_->abortEpoch() : 0;
  if (l.introduced) {
    // The connector's trailer is the first message: its receive is posted
    // before any of NCCL's (Introduction).
    if (Status s = Introduction::start(*conn->recvComm(), &conn->introduction); !s.ok()) {
      (void)conn->inner().close();
      return s;
    }
  } else {
    watchdog_->awaitLink(*conn, l.nonce);
  }
  watchdog_->add(conn.get());
  *recvComm = conn.release();
  return {};
}

Status Core::introduce(ConnectionRecord& c) {
  bool arrived = false;
  HandleTrailer theirs;
  if (Status s = c.introduction->progress(&arrived, &theirs); !s.ok()) {
    return failTransport(c, s, "test (the in-band introduction)");
  }
  if (arrived && theirs.liveness.ss_family != AF_UNSPEC) {
    watchdog_->linkTo(c, theirs);  // once per connection: the watchdog's mutex is fine here
  }
  return {};
}

Status Core::postIntroduction(ConnectionRecord& c, bool* posted) {
  if (Status s = c.introduction->post(posted); !s.ok()) {
    return failTransport(c, s, "the in-band introduction");
  }
  return {};
}

Status Core::regMr(ConnectionRecord& comm, std::byte* data, size_t size, int type,
                   transport::MemoryRegion** region) {
  std::unique_ptr<transport::MemoryRegion> r;
  RESILIENT_TRY(comm.inner().regMr(data, size, type, &r));
  *region = r.release();
  return {};
}

Status Core::regMrDmaBuf(ConnectionRecord& comm, std::byte* data, size_t size, int type,
                         uint64_t offset, int fd, transport::MemoryRegion** region) {
  std::unique_ptr<transport::MemoryRegion> r;
  RESILIENT_TRY(comm.inner().regMrDmaBuf(data, size, type, offset, fd, &r));
  *region = r.release();
  return {};
}

Status Core::getDeviceMr(ConnectionRecord& comm, transport::MemoryRegion* region,
                         transport::DeviceRegion** deviceRegion) {
  return comm.inner().getDeviceMr(region, deviceRegion);
}

Status Core::deregMr(ConnectionRecord& comm, transport::MemoryRegion* region) {
  return comm.inner().deregMr(std::unique_ptr<transport::MemoryRegion>(region));
}

Status Core::checkUsable(ConnectionRecord& conn) noexcept {
  if (const FaultRecord* f = conn.fault()) {
    return f->status;
  }
  if (blackbox_ != nullptr && blackbox_->failFast()) {
    return fail(conn, FaultClass::kAborted, Status(),
                "the fail-fast switch is set: every request fails at once");
  }
  return {};
}

Status Core::isend(ConnectionRecord& c, std::byte* data, size_t size, int tag,
                   transport::MemoryRegion* region, transport::ProfilerHandle* phandle,
                   RequestRecord** request) {
  *request = nullptr;
  RESILIENT_TRY(checkUsable(c));
  if (c.introduction != nullptr && !c.introduction->posted()) {
    bool posted = false;
    RESILIENT_TRY(postIntroduction(c, &posted));
    if (!posted) {
      return {};  // ours goes first: NCCL retries later
    }
  }
  RequestRecord* r = c.acquire();
  if (r == nullptr) {
    return {};  // NCCL retries later
  }
  transport::Request* innerReq = nullptr;
  Status s = c.sendComm()->isend(data, size, tag, region, phandle, &innerReq);
  if (!s.ok() || innerReq == nullptr) {
    c.release(r);
    return s.ok() ? s : failTransport(c, s, "isend");
  }
  r->inner = innerReq;
  r->bytes = size;
  c.onPosted(size);
  *request = r;
  return {};
}

Status Core::irecv(ConnectionRecord& c, int n, std::byte** data, const size_t* sizes,
                   const int* tags, transport::MemoryRegion** regions,
                   transport::ProfilerHandle** phandles, RequestRecord** request) {
  *request = nullptr;  // always overwrite: NCCL may have stored 0x1 there
  RESILIENT_TRY(checkUsable(c));
  if (c.introduction != nullptr && !c.introduction->posted()) {
    bool posted = false;
    RESILIENT_TRY(postIntroduction(c, &posted));
    if (!posted) {
      return {};  // ours is received first: NCCL retries later
    }
  }
  RequestRecord* r = c.acquire();
  if (r == nullptr) {
    return {};
  }
  transport::Request* innerReq = nullptr;
  Status s = c.recvComm()->irecv(n, data, sizes, tags, regions, phandles, &innerReq);
  if (!s.ok() || innerReq == nullptr) {
    c.release(r);
    return s.ok() ? s : failTransport(c, s, "irecv");
  }
  uint64_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    bytes += sizes[i];
  }
  r->inner = innerReq;
  r->bytes = bytes;
  r->heldUntilConsumed = c.consumes();
  c.onPosted(bytes);
  *request = r;
  return {};
}

Status Core::iflush(ConnectionRecord& c, int n, std::byte** data, const int* sizes,
                    transport::MemoryRegion** regions, RequestRecord** request) {
  *request = nullptr;
  RESILIENT_TRY(checkUsable(c));
  RequestRecord* r = c.acquire();
  if (r == nullptr) {
    return internalError("iflush: no free request slot");
  }
  transport::Request* innerReq = nullptr;
  Status s = c.recvComm()->iflush(n, data, sizes, regions, &innerReq);
  if (!s.ok() || innerReq == nullptr) {
    c.release(r);
    return s.ok() ? s : failTransport(c, s, "iflush");
  }
  r->inner = innerReq;
  r->bytes = 0;
  c.onPosted(0);
  *request = r;
  return {};
}

Status Core::test(RequestRecord& request, int* done, int* sizes) {
  RequestRecord* r = &request;
  ConnectionRecord& c = *r->conn;
  *done = 0;
  RESILIENT_TRY(checkUsable(c));
  if (c.introduction != nullptr && !c.introduction->done()) {
    RESILIENT_TRY(introduce(c));
  }
  Status s = r->inner->test(done, sizes);
  if (!s.ok()) {
    return failTransport(c, s, "test");
  }
  if (*done != 0) {
    c.onCompleted(r->bytes);
    if (!r->heldUntilConsumed) {
      c.release(r);
    }
  }
  return {};
}

Status Core::irecvConsumed(ConnectionRecord& c, int n, RequestRecord* request) {
  // NCCL passes back a receive test() reported done (src/transport/net.cc,
  // recvProxyProgress); anything else was never held.
  if (request == nullptr || !request->heldUntilConsumed || request->conn != &c) {
    return {};
  }
  Status s = c.recvComm()->irecvConsumed(n, request->inner);
  c.release(request);
  return s.ok() ? s : failTransport(c, s, "irecvConsumed");
}

Status Core::close(std::unique_ptr<ConnectionRecord> c) {
  watchdog_->remove(c.get());
  if (c->introduction != nullptr) {
    c->introduction->release();
  }
  return c->inner().close();
}

Status Core::closeSend(ConnectionRecord* sendComm) {
  return close(std::unique_ptr<ConnectionRecord>(sendComm));
}

Status Core::closeRecv(ConnectionRecord* recvComm) {
  return close(std::unique_ptr<ConnectionRecord>(recvComm));
}

Status Core::closeListen(ListenRecord* listener) {
  std::unique_ptr<ListenRecord> l(listener);
  watchdog_->forgetListenNonce(l->nonce);
  return l->inner->close();
}

void Core::report(ConnectionRecord& conn, const Fault& fault) {
  fail(conn, fault.cls, Status(), fault.detail, fault.root);
  if (const FaultRecord* f = conn.fault(); f != nullptr && f->cls != FaultClass::kAborted) {
    watchdog_->announceLocked(f->root, conn.commId());  // the watchdog's mutex is held (FaultSink)
  }
}

Status Core::failTransport(ConnectionRecord& conn, const Status& cause, const char* call) {
  std::string detail = std::string(call) + " failed";
  FaultClass cls = FaultClass::kTransportError;
  Status reported = cause;
  std::optional<RootCause> root;
  const bool local = !cause.ok() && cause.kind() != ErrorKind::kRemote;
  // A local error is ours only if the peer still answers: asked now, as the
  // kernel of a dying peer may reset the inner transport's socket before the
  // liveness link's.
  Watchdog::PeerNews news = watchdog_->peerNews(conn, /*confirm=*/local);
  if (local && news.death) {
    // A local-looking error (EPIPE, a reset the inner transport calls local)
    // from a peer the liveness channel knows to be gone or going: the peer's
    // fault, remote, whichever of the two was seen first.
    cls = news.death->cls;
    detail += " (" + cause.message() + "); " + news.death->detail;
    reported = Status();
    root = std::move(news.death->root);
  } else if ((root = std::move(news.reason))) {
    detail += " after the peer had detected " + describe(*root);
  } else if (local && news.answering) {
    // A local error (our resources, an error injected here) while the peer
    // answers heartbeats: this process is the culprit, not its peer.
    root = RootCause{FaultClass::kLocalError, static_cast<uint32_t>(getpid()), hostName_,
                     detail + ": " + cause.message()};
  }
  Status s = fail(conn, cls, reported, detail, root);
  if (const FaultRecord* f = conn.fault(); f != nullptr && f->cls != FaultClass::kAborted) {
    watchdog_->announce(f->root, conn.commId());
  }
  return s;
}

Status Core::fail(ConnectionRecord& conn, FaultClass cls, const Status& cause,
                  const std::string& givenDetail, const std::optional<RootCause>& root) {
  std::string detail = givenDetail;
  if (cls != FaultClass::kAborted && blackbox_ != nullptr &&
      blackbox_->abortEpoch() != conn.abortEpoch) {
    // The connection's communicator was aborted here (a restart) since it was
    // made: what its peer does now, closing its side of the same communicator
    // included, is no new fault.
    detail = std::string("its communicator was aborted by this process; then: ") +
             faultClassName(cls) + ": " + detail;
    cls = FaultClass::kAborted;
  }
  const uint64_t now = monotonicNs();
  auto record = std::make_unique<FaultRecord>();
  record->cls = cls;
  record->detectedNs = now;
  if (root) {
    record->root = *root;
  } else {
    // The connection's own peer is the culprit.
    record->root.cls = cls;
    record->root.detail = cause.ok() ? detail : detail + ": " + cause.message();
    if (const liveness::PeerLink* link = conn.link.load(std::memory_order_acquire)) {
      record->root.pid = link->state.pid();
      if (link->state.helloSeen()) {
        record->root.host = link->state.host();
      }
    }
  }
  const double sinceProgressMs =
      conn.lastProgressNs() != 0 ? static_cast<double>(now - conn.lastProgressNs()) / 1e6 : 0.0;
  char head[160];
  snprintf(head, sizeof head, "%s on %s connection of comm 0x%" PRIx64 ": ", faultClassName(cls),
           conn.directionName(), conn.commId());
  std::string text = head;
  text += describeEnds(conn);
  text += ": " + detail;
  if (!cause.ok()) {
    text += ": " + cause.toString();
  }
  char tail[160];
  snprintf(tail, sizeof tail,
           "; %.0f ms since last progress, %d requests (%" PRIu64 " bytes) outstanding",
           sinceProgressMs, conn.outstanding(), conn.outstandingBytes());
  text += tail;
  record->text = text;
  if (cls == FaultClass::kTransportError && !cause.ok()) {
    record->status = Status::error(cause.kind(), text, cause.sysErrno(), conn.identity.peer.text);
  } else if (isRemote(cls)) {
    record->status = remoteError(text, conn.identity.peer.text);
  } else {
    record->status = Status::error(ErrorKind::kSystem, text);
  }
  Status result = record->status;
  if (conn.claimFault()) {
    // The inner plugin's later WARNs annotated, then our WARN, both before
    // the error is published: whoever sees the error finds its explanation
    // logged, and NCCL's last error (its last WARN, whichever thread logs
    // it) names the root cause. Annotating after our WARN left a window in
    // which an inner WARN from another thread came last, unannotated (CI:
    // ofi-wrapped-kill, aws-ofi-nccl's "Transport endpoint is not connected").
    if (cls != FaultClass::kAborted) {
      char where[96];
      snprintf(where, sizeof where, "the fault of a %s connection of comm 0x%" PRIx64 ": ",
               conn.directionName(), conn.commId());
      inner_log::explained(conn.abortEpoch, where + describe(record->root));
    }
    RES_WARN(NCCL_NET, "%s", text.c_str());
    if (blackbox_ != nullptr) {
      resilient_blackbox_fault f{};
      f.faultClass = static_cast<uint32_t>(cls);
      f.commId = conn.commId();
      f.remote = toNcclResult(result) == ncclRemoteError ? 1 : 0;
      blackbox::copyText(f.peer, conn.identity.peer.text);
      // The process blamed: the root cause (the connection's own peer, or the
      // first fault that peer named, or this process for a local error).
      f.peerPid = record->root.pid;
      blackbox::copyText(f.peerHost, record->root.host);
      blackbox::copyText(f.text, text);
      blackbox_->recordFault(f);
    }
    conn.publishFault(std::move(record));
    return result;
  }
  // Another thread is explaining a fault of this connection (or has): its
  // record becomes the sticky one; this caller gets its own finding.
  const FaultRecord* published = conn.fault();
  return published != nullptr ? published->status : result;
}

}  // namespace resilient::net
