// The version-neutral core of the net plugin: the resilient layer between
// NCCL's per-version adapters (plugin/net/abi/) and the inner transport.
//
// The adapters translate each ABI version's calls into these; every call
// returns a Status that the adapter's boundary guard turns into an
// ncclResult_t. Control-path calls (init, listen, connect, accept, close,
// finalize) come from NCCL's init and proxy service threads and take the
// core's mutex; data-path calls (isend, irecv, iflush, test) come from the
// proxy progress threads and take no lock and allocate nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "common/clock.h"
#include "common/status.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/watchdog.h"
#include "plugin/transport/collnet.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

// What a plugin build links into the core: the library's own exported
// structs (so that the external loader can refuse to load ourselves).
struct SelfIdentity {
  const void* const* symbols = nullptr;  // addresses of our ncclNetPlugin_v* structs
  size_t count = 0;
};

// A communicator's context: its id and the inner transport's context.
struct CommContext {
  uint64_t commId = 0;
  std::unique_ptr<transport::Context> inner;  // may be empty
};

// A listen comm: the inner listener and what its connections inherit.
struct ListenRecord {
  uint64_t commId = 0;
  std::unique_ptr<transport::Listener> inner;
  uint64_t nonce = 0;
  int dev = 0;
  bool introduced = false;  // no trailer in its handle: connections introduce themselves
};

// A CollNet listen comm (one per rank): the inner listener and its
// communicator.
struct CollListenRecord {
  uint64_t commId = 0;
  int dev = 0;
  std::unique_ptr<transport::CollListener> inner;
};

// Core is the FaultSink of its watchdog: the liveness channel's and the
// progress monitor's faults become Core::fail.
class Core final : private FaultSink {
 public:
  // The process-wide core; created by the first init, destroyed by the last
  // finalize (or when the library is unloaded).
  static Core* acquire(const SelfIdentity& self, ncclDebugLogger_t logger, Status* error);
  static void releaseRef(Core* core);
  // The core for data-path calls (NCCL makes them only between init and
  // finalize); nullptr if there is none.
  static Core* live() noexcept;

  // What NCCL holds between calls, each handed to it as a pointer the ABI
  // adapters (plugin/net/abi/) give back: NCCL's untyped pointers become
  // these there and nowhere else. The same names in PlainCore.
  using ContextHandle = CommContext;
  using ListenHandle = ListenRecord;
  using CommHandle = ConnectionRecord;  // a send or a receive comm
  using RequestHandle = RequestRecord;
  using RegionHandle = transport::MemoryRegion;

  // Each call that makes an object hands its ownership to the caller through
  // the raw pointer; the matching finalize, close or deregMr takes it back.
  Status initContext(uint64_t commId, const transport::CommConfig& config, CommContext** ctx);
  Status finalizeContext(CommContext* ctx);

  Status devices(int* ndev);
  Status properties(int dev, transport::Properties* props);
  // ctx may be nullptr (no per-communicator context); handle: kHandleSize bytes.
  Status listen(CommContext* ctx, int dev, std::byte* handle, ListenRecord** listener);
  // wantDeviceHandle: NCCL passed a device-handle out-pointer (v7+); the
  // comm's inner().deviceHandle() is then what the inner transport gave.
  Status connect(CommContext* ctx, int dev, std::byte* handle,
                 transport::DeviceHandleRequest wantDeviceHandle, ConnectionRecord** sendComm);
  Status accept(ListenRecord& listener, transport::DeviceHandleRequest wantDeviceHandle,
                ConnectionRecord** recvComm);
  Status regMr(ConnectionRecord& comm, std::byte* data, size_t size, int type,
               transport::MemoryRegion** region);

  // The inner transport's optional calls (transport::Capabilities), passed
  // through; NCCL is offered each exactly when the inner transport has it
  // (plugin/net/abi/optional_calls.h).
  transport::Capabilities capabilities() const noexcept { return inner_->capabilities(); }
  // The device handle the inner transport gave the comm at connect/accept.
  transport::DeviceHandle* deviceHandle(ConnectionRecord& comm) const noexcept {
    return comm.inner().deviceHandle();
  }
  Status regMrDmaBuf(ConnectionRecord& comm, std::byte* data, size_t size, int type,
                     uint64_t offset, int fd, transport::MemoryRegion** region);
  Status getDeviceMr(ConnectionRecord& comm, transport::MemoryRegion* region,
                     transport::DeviceRegion** deviceRegion);
  // A completed receive NCCL has consumed: passed on, and its request back to the pool.
  Status irecvConsumed(ConnectionRecord& recvComm, int n, RequestRecord* request);
  Status makeVDevice(const transport::VirtualDevice& props, int* dev) {
    return inner_->makeVDevice(props, dev);
  }
  Status setNetAttr(CommContext* ctx, transport::NetAttributes* attr) {
    return inner_->setNetAttr(ctx != nullptr ? ctx->inner.get() : nullptr, attr);
  }
  Status deregMr(ConnectionRecord& comm, transport::MemoryRegion* region);
  Status isend(ConnectionRecord& sendComm, std::byte* data, size_t size, int tag,
               transport::MemoryRegion* region, transport::ProfilerHandle* phandle,
               RequestRecord** request);
  Status irecv(ConnectionRecord& recvComm, int n, std::byte** data, const size_t* sizes,
               const int* tags, transport::MemoryRegion** regions,
               transport::ProfilerHandle** phandles, RequestRecord** request);
  Status iflush(ConnectionRecord& recvComm, int n, std::byte** data, const int* sizes,
                transport::MemoryRegion** regions, RequestRecord** request);
  Status test(RequestRecord& request, int* done, int* sizes);
  Status closeSend(ConnectionRecord* sendComm);
  Status closeRecv(ConnectionRecord* recvComm);
  Status closeListen(ListenRecord* listener);

  transport::Transport& inner() noexcept { return *inner_; }

  // CollNet (collnet_core.cc): the inner transport's CollNet wrapped as its
  // net is. Each collective comm is a ConnectionRecord of direction kColl
  // (a fixed request pool; test, regMr, regMrDmaBuf and deregMr above serve
  // it too) that the watchdog watches: an error of the inner CollNet is one
  // explained WARN and a sticky error, a collective on which nothing
  // completes for NCCL_RESILIENT_PROGRESS_TIMEOUT_MS is "peer stuck".
  // nullptr: the inner library has no CollNet.
  transport::CollNet* collNet() noexcept { return inner_->collNet(); }
  // v6-v10 CollNets: the one context of the process (NCCL's adapters init
  // those once: src/plugin/net/net_v6..v10.cc, ncclCollNet_init), made by
  // the first call and owned by the core (a later core makes its own).
  Status collLegacyContext(CommContext** ctx);
  Status collInitContext(uint64_t commId, CommContext** ctx);
  Status collListen(CommContext* ctx, int dev, std::byte* handle, CollListenRecord** listener);
  // handles: nranks listen handles; *comm stays nullptr when the inner
  // CollNet has none for this communicator.
  Status collConnect(std::byte* const* handles, int nranks, int rank, CollListenRecord& listener,
                     ConnectionRecord** comm);
  Status reduceSupport(transport::Reduction op, int* supported);
  Status iallreduce(ConnectionRecord& c, std::byte* send, std::byte* recv, size_t count,
                    transport::Reduction op, transport::MemoryRegion* sendRegion,
                    transport::MemoryRegion* recvRegion, RequestRecord** request);
  Status iallgather(ConnectionRecord& c, std::byte* send, int nRecvParts,
                    const transport::CollPiece* recvParts, transport::CollWindow window,
                    transport::MemoryRegion* sendRegion, RequestRecord** request);
  Status ireducescatter(ConnectionRecord& c, int nSendParts, const transport::CollPiece* sendParts,
                        std::byte* recv, transport::CollWindow window, transport::Reduction op,
                        transport::MemoryRegion* recvRegion, RequestRecord** request);
  Status collIflush(ConnectionRecord& c, std::byte* data, int size,
                    transport::MemoryRegion* region, RequestRecord** request);
  Status closeColl(ConnectionRecord* comm);
  Status collCloseListen(CollListenRecord* listener);

  // Publishes a fault on `conn` (first one wins), logs the one WARN that
  // explains it and returns the status every later call on it returns.
  // `root`: the cascade's first fault when the peer named one in its goodbye
  // (unset: this fault, with the connection's peer as its culprit).
  Status fail(ConnectionRecord& conn, FaultClass cls, const Status& cause,
              const std::string& detail, const std::optional<RootCause>& root = std::nullopt);
  // A failed call of the inner transport on the data path: fail() with what
  // the peer said it detected first, if it did (root cause), then the fault
  // is announced to every peer.
  Status failTransport(ConnectionRecord& conn, const Status& cause, const char* call);

  ~Core() override;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

 private:
  Core(std::unique_ptr<transport::Transport> inner, const WatchdogOptions& watchdog,
       std::unique_ptr<blackbox::Writer> blackbox);

  Status checkUsable(ConnectionRecord& conn) noexcept;
  // The trailer that advertises `key` (one saying "no liveness channel" when
  // there is none).
  HandleTrailer trailerFor(uint64_t key);
  // Whether connections on `dev` can be introduced in band (a WARN, once,
  // when not: they run without a liveness channel).
  bool canIntroduceOn(int dev);
  // The data path's part of an in-band introduction (Introduction): post it
  // first, test it, and link the connection once the peer's trailer came.
  Status postIntroduction(ConnectionRecord& c, bool* posted);
  Status introduce(ConnectionRecord& c);
  // What the layer knows of a connection's local end when the inner
  // transport gives none (external plugins: NCCL's API has no endpoints).
  void describeLocalEnd(ConnectionRecord& conn, int dev) const noexcept;
  void report(ConnectionRecord& conn, const Fault& fault) override;
  // Posts one collective on the CollNet comm `c` (post: Request** -> Status,
  // the inner CollNet's call): a request of c's pool handed out, or nothing
  // (NCCL retries), or the comm failed by the inner error (`call` names it).
  template <class Post>
  Status postCollective(ConnectionRecord& c, uint64_t bytes, const char* call,
                        RequestRecord** request, Post post);
  // Takes the connection out of the watchdog and closes its inner comm.
  Status close(std::unique_ptr<ConnectionRecord> conn);

  std::unique_ptr<transport::Transport> inner_;
  const SystemClock clock_;                     // the watchdog's; outlives it (declared before)
  std::unique_ptr<blackbox::Writer> blackbox_;  // may be null (NCCL_RESILIENT_BLACKBOX_DIR empty)
  std::unique_ptr<Watchdog> watchdog_;
  const std::string hostName_;  // ours, as the liveness channel's hello says it
  int refs_ = 0;                // guarded by the global core mutex
  std::mutex collLegacyMutex_;
  std::unique_ptr<CommContext> collLegacy_;  // guarded by collLegacyMutex_
  std::atomic<bool> warnedNoIntroduction_{false};
  std::atomic<bool> infoIntroduction_{false};
};

}  // namespace resilient::net
