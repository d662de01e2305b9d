#include "plugin/transport/tcp/tcp_transport.h"

#include <sys/random.h>
#include <unistd.h>

#include <climits>

#include "common/clock.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/connector.h"
#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/listener.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {
namespace {

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) {
    return "?";
  }
  return buf;
}

// A connection nonce: random, else a mix of clock, pid and a counter.
uint64_t randomNonce() noexcept {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v) && v != 0) {
    return v;
  }
  static std::atomic<uint64_t> counter{0};
  v = monotonicNs() ^ (static_cast<uint64_t>(getpid()) << 40) ^
      (counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ull);
  return v == 0 ? 1 : v;
}

template <class T>
T* commAs(void* comm, CommKind kind) noexcept {
  auto* base = static_cast<CommBase*>(comm);
  return base != nullptr && base->kind() == kind ? static_cast<T*>(base) : nullptr;
}

Status wrongComm(const char* call) {
  return internalError(std::string("tcp: ") + call + " on a null or foreign comm");
}

}  // namespace

TcpTransport::TcpTransport(const TcpOptions& options)
    : options_(clampOptions(options)), hostname_(hostName()) {}

TcpTransport::~TcpTransport() = default;

Status TcpTransport::initContext(uint64_t commId, const CommConfig& config, void** ctx) {
  (void)commId;
  (void)config;
  *ctx = nullptr;
  return {};
}

Status TcpTransport::finalizeContext(void* ctx) {
  (void)ctx;
  return {};
}

Status TcpTransport::ensureDevices() {
  if (devicesLoaded_.load(std::memory_order_acquire)) {
    return devicesStatus_;
  }
  std::lock_guard<std::mutex> lock(devicesMutex_);
  if (!devicesLoaded_.load(std::memory_order_relaxed)) {
    devicesStatus_ = findDevices(options_, &devices_);
    if (devicesStatus_.ok()) {
      for (size_t i = 0; i < devices_.size(); ++i) {
        RES_INFO(NCCL_NET | NCCL_INIT, "tcp: device %zu: %s %s, %d Mbps%s%s", i,
                 devices_[i].name.c_str(), devices_[i].address.hostText().c_str(),
                 devices_[i].speedMbps, devices_[i].pciPath.empty() ? "" : ", ",
                 devices_[i].pciPath.c_str());
      }
    }
    devicesLoaded_.store(true, std::memory_order_release);
  }
  return devicesStatus_;
}

Status TcpTransport::checkDevice(int dev) {
  RESILIENT_TRY(ensureDevices());
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) {
    return invalidUsage("tcp: device " + std::to_string(dev) + " out of range (" +
                        std::to_string(devices_.size()) + " devices)");
  }
  return {};
}

Status TcpTransport::devices(int* ndev) {
  *ndev = 0;
  RESILIENT_TRY(ensureDevices());
  *ndev = static_cast<int>(devices_.size());
  return {};
}

Status TcpTransport::properties(int dev, Properties* props) {
  RESILIENT_TRY(checkDevice(dev));
  const Device& d = devices_[static_cast<size_t>(dev)];
  *props = Properties{};
  props->name = d.name.c_str();
  props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.c_str();
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speedMbps = d.speedMbps;
  props->port = 0;
  props->latencyUs = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxRecvs;
  props->maxP2pBytes = kMaxMessageBytes;
  props->maxCollBytes = kMaxMessageBytes;
  return {};
}

size_t TcpTransport::handleBytes() const noexcept {
  return kHandleBytes;
}

Status TcpTransport::listen(void* ctx, int dev, void* handle, void** listenComm) {
  (void)ctx;
  *listenComm = nullptr;
  RESILIENT_TRY(checkDevice(dev));
  std::unique_ptr<ListenComm> comm;
  RESILIENT_TRY(ListenComm::create(devices_[static_cast<size_t>(dev)].address, options_,
                                   &listenWarnLimiters_, &comm));
  encodeHandle(toListenHandle(comm->address()), handle);
  RES_INFO(NCCL_NET | NCCL_INIT, "tcp: listening on %s (%s)", comm->address().toString().c_str(),
           devices_[static_cast<size_t>(dev)].name.c_str());
  *listenComm = static_cast<CommBase*>(comm.release());
  return {};
}

Status TcpTransport::connect(void* ctx, int dev, void* handle, void** sendComm) {
  (void)ctx;
  *sendComm = nullptr;
  RESILIENT_TRY(checkDevice(dev));
  Connector* connector = nullptr;
  {
    std::lock_guard<std::mutex> lock(connectingMutex_);
    auto it = connecting_.find(handle);
    if (it != connecting_.end() && !it->second->sameHandle(handle)) {
      connecting_.erase(it);  // the caller reused the buffer for another connection
      it = connecting_.end();
    }
    if (it == connecting_.end()) {
      ListenHandle decoded;
      RESILIENT_TRY(decodeHandle(handle, &decoded));
      it = connecting_
               .emplace(handle, std::make_unique<Connector>(decoded, handle, options_, hostname_,
                                                            randomNonce()))
               .first;
    }
    connector = it->second.get();
  }
  std::unique_ptr<SendComm> comm;
  const Status status = connector->poll(&comm);
  if (!status.ok() || comm != nullptr) {
    std::lock_guard<std::mutex> lock(connectingMutex_);
    connecting_.erase(handle);
  }
  RESILIENT_TRY(status);
  *sendComm = static_cast<CommBase*>(comm.release());
  return {};
}

Status TcpTransport::accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* listener = commAs<ListenComm>(listenComm, CommKind::kListen);
  if (listener == nullptr) {
    return wrongComm("accept");
  }
  std::unique_ptr<RecvComm> comm;
  RESILIENT_TRY(listener->accept(&comm));
  *recvComm = static_cast<CommBase*>(comm.release());
  return {};
}

Status TcpTransport::regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm;
  (void)data;
  (void)size;
  *mhandle = nullptr;
  if (type != kPtrHost) {
    return invalidUsage("tcp: only host memory can be registered (type " + std::to_string(type) +
                        ")");
  }
  return {};
}

Status TcpTransport::deregMr(void* comm, void* mhandle) {
  (void)comm;
  (void)mhandle;
  return {};
}

Status TcpTransport::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request) {
  (void)mhandle;
  (void)phandle;
  auto* comm = commAs<SendComm>(sendComm, CommKind::kSend);
  if (comm == nullptr) {
    *request = nullptr;
    return wrongComm("isend");
  }
  return comm->isend(data, size, tag, request);
}

Status TcpTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                           void** mhandles, void** phandles, void** request) {
  (void)mhandles;
  (void)phandles;
  auto* comm = commAs<RecvComm>(recvComm, CommKind::kRecv);
  if (comm == nullptr) {
    *request = nullptr;
    return wrongComm("irecv");
  }
  return comm->irecv(n, data, sizes, tags, request);
}

Status TcpTransport::iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                            void** request) {
  (void)n;
  (void)data;
  (void)sizes;
  (void)mhandles;
  *request = nullptr;  // host memory: nothing to flush
  auto* comm = commAs<RecvComm>(recvComm, CommKind::kRecv);
  if (comm == nullptr) {
    return wrongComm("iflush");
  }
  return comm->error();
}

Status TcpTransport::test(void* request, int* done, int* sizes) {
  auto* r = static_cast<TcpRequest*>(request);
  if (r == nullptr) {
    *done = 0;
    return internalError("tcp: test() on a null request");
  }
  if (r->kind == CommKind::kSend) {
    return static_cast<SendComm*>(r->comm)->test(static_cast<SendRequest*>(r), done, sizes);
  }
  if (r->kind == CommKind::kRecv) {
    return static_cast<RecvComm*>(r->comm)->test(static_cast<RecvRequest*>(r), done, sizes);
  }
  *done = 0;
  return internalError("tcp: test() on a foreign request");
}

Status TcpTransport::closeSend(void* sendComm) {
  auto* comm = commAs<SendComm>(sendComm, CommKind::kSend);
  if (comm == nullptr) {
    return sendComm == nullptr ? Status() : wrongComm("closeSend");
  }
  comm->close();
  delete comm;
  return {};
}

Status TcpTransport::closeRecv(void* recvComm) {
  auto* comm = commAs<RecvComm>(recvComm, CommKind::kRecv);
  if (comm == nullptr) {
    return recvComm == nullptr ? Status() : wrongComm("closeRecv");
  }
  comm->close();
  delete comm;
  return {};
}

Status TcpTransport::closeListen(void* listenComm) {
  auto* comm = commAs<ListenComm>(listenComm, CommKind::kListen);
  if (comm == nullptr) {
    return listenComm == nullptr ? Status() : wrongComm("closeListen");
  }
  delete comm;
  return {};
}

bool TcpTransport::bytesMoved(void* comm, uint64_t* bytes) noexcept {
  auto* base = static_cast<CommBase*>(comm);
  if (base == nullptr || (base->kind() != CommKind::kSend && base->kind() != CommKind::kRecv)) {
    return false;
  }
  *bytes = static_cast<TcpConnection*>(base)->bytesMoved();
  return true;
}

bool TcpTransport::linkBacklogged(void* comm, bool* backlogged) noexcept {
  auto* base = static_cast<CommBase*>(comm);
  if (base == nullptr || base->kind() != CommKind::kSend) {
    return false;
  }
  return static_cast<TcpConnection*>(base)->networkBacklogged(backlogged);
}

bool TcpTransport::endpoints(void* comm, Endpoint* local, Endpoint* peer) noexcept {
  auto* base = static_cast<CommBase*>(comm);
  if (base == nullptr || (base->kind() != CommKind::kSend && base->kind() != CommKind::kRecv)) {
    return false;
  }
  const auto* connection = static_cast<TcpConnection*>(base);
  if (local != nullptr) {
    *local = connection->localEndpoint();
  }
  if (peer != nullptr) {
    *peer = connection->peerEndpoint();
  }
  return true;
}

}  // namespace resilient::transport::tcp
