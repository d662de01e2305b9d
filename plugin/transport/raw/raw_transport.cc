#include "plugin/transport/raw/raw_transport.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "common/clock.h"
#include "common/file_descriptor.h"
#include "common/little_endian.h"
#include "common/net/socket_address.h"

namespace resilient::transport::raw {
namespace {

constexpr uint32_t kHandleMagic = 0x54574152;  // "RAWT"
constexpr uint32_t kHelloMagic = 0x4f4c4857;   // "WHLO"
constexpr uint16_t kHelloVersion = 1;
constexpr size_t kHelloBytes = 32;
constexpr size_t kHeaderBytes = 8;
// Outstanding requests per comm: a ring (the sockets take requests in
// posting order), more than NCCL keeps out per comm (kMaxRequests).
constexpr size_t kRing = 256;
static_assert(kRing >= static_cast<size_t>(transport::kMaxRequests));
constexpr size_t kMaxPendingSockets = 256;
// Where connect() keeps its state between polls: inside the caller's
// writable handle, past the bytes listen() wrote (the handle contract of
// NCCL's own socket plugin).
constexpr size_t kHandleStateOffset = 64;
struct ConnectState;
constexpr size_t kStatePointerBytes = sizeof(ConnectState*);  // stored there

struct Handle {
  uint32_t magic;
  uint32_t sockets;
  uint64_t token;
  uint32_t addressLength;
  uint32_t pad;
  uint8_t address[32];
};
static_assert(sizeof(Handle) <= kHandleStateOffset);
static_assert(kHandleStateOffset + kStatePointerBytes <= transport::kHandleSize);
static_assert(sizeof(sockaddr_in6) <= 32);

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t index;
  uint32_t count;
  uint32_t pad;
  uint64_t token;
  uint64_t connectionId;
};
static_assert(sizeof(Hello) == kHelloBytes);

struct CommCore;

// One slot of a comm's ring.
class RawTcpRequest final : public transport::Request {
 public:
  // Progresses the comm (every request of it) and says whether this one is done.
  Status test(int* done, int* sizes) override;

  // Makes the slot a fresh request of `c`.
  void reset(CommCore* c) noexcept {
    comm = c;
    inUse = true;
    data = nullptr;
    capacity = 0;
    size = 0;
    sizeKnown = false;
    socketsDone = 0;
    std::memset(header, 0, sizeof header);
  }

  CommCore* comm = nullptr;
  bool inUse = false;
  std::byte* data = nullptr;
  size_t capacity = 0;  // receive: the posted size
  size_t size = 0;      // send: the size; receive: announced by the sender
  bool sizeKnown = false;
  int socketsDone = 0;
  uint8_t header[kHeaderBytes] = {};
};

struct DataSocket {
  FileDescriptor fd;
  uint64_t cursor = 0;  // sequence number of the request this socket works on
  size_t offset = 0;    // bytes of header + slice done for it
  uint8_t header[kHeaderBytes] = {};
};

// What a send or receive comm holds: its sockets and its ring of requests.
struct CommCore {
  bool send = false;
  std::vector<DataSocket> sockets;
  std::array<RawTcpRequest, kRing> ring{};
  uint64_t head = 0;  // oldest request not released
  uint64_t tail = 0;  // next request to post
  Status failed;
  std::string peer;
};

struct PendingSocket {
  FileDescriptor fd;
  Hello hello{};
  size_t got = 0;
  uint64_t sinceNs = 0;
};

struct ConnectState {
  std::vector<FileDescriptor> sockets;
  std::vector<size_t> helloSent;
  std::vector<bool> connected;
  uint64_t connectionId = 0;
  uint64_t deadlineNs = 0;
};

struct Slice {
  size_t begin;
  size_t length;
};

Slice sliceOf(size_t size, size_t index, size_t count) {
  const size_t begin = size * index / count;
  const size_t end = size * (index + 1) / count;
  return {begin, end - begin};
}

// Fails the comm for good with the Status of socket error `err` (0: end of stream).
Status failComm(CommCore& c, int err, const char* what) {
  c.failed = connectionError(err, std::string("raw-tcp ") + what, c.peer);
  return c.failed;
}

Status progressSend(CommCore& c) {
  const size_t count = c.sockets.size();
  for (size_t i = 0; i < count; ++i) {
    DataSocket& s = c.sockets[i];
    while (s.cursor < c.tail) {
      RawTcpRequest& r = c.ring[s.cursor % kRing];
      const Slice slice = sliceOf(r.size, i, count);
      const size_t total = kHeaderBytes + slice.length;
      iovec iov[2];
      int n = 0;
      if (s.offset < kHeaderBytes) {
        iov[n++] = {r.header + s.offset, kHeaderBytes - s.offset};
      }
      const size_t payloadDone = s.offset > kHeaderBytes ? s.offset - kHeaderBytes : 0;
      if (slice.length > payloadDone) {
        iov[n++] = {r.data + slice.begin + payloadDone, slice.length - payloadDone};
      }
      if (n > 0) {
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(n);
        const ssize_t w = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            break;
          }
          if (errno == EINTR) {
            continue;
          }
          return failComm(c, errno, "send");
        }
        s.offset += static_cast<size_t>(w);
      }
      if (s.offset == total) {
        ++r.socketsDone;
        ++s.cursor;
        s.offset = 0;
      }
    }
  }
  return {};
}

// A non-blocking receive on one of the comm's sockets (len > 0): *got is the
// bytes read, 0 when there is nothing to read now; EOF and errors fail the
// comm. EINTR is retried.
Status recvSome(CommCore& c, int fd, std::byte* buf, size_t len, size_t* got) {
  for (;;) {
    const ssize_t n = ::recv(fd, buf, len, MSG_DONTWAIT);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return {};
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      *got = 0;
      return {};
    }
    return failComm(c, n == 0 ? 0 : errno, "receive");
  }
}

Status progressRecv(CommCore& c) {
  const size_t count = c.sockets.size();
  for (size_t i = 0; i < count; ++i) {
    DataSocket& s = c.sockets[i];
    while (s.cursor < c.tail) {
      RawTcpRequest& r = c.ring[s.cursor % kRing];
      size_t got = 0;
      if (s.offset < kHeaderBytes) {
        RESILIENT_TRY(recvSome(c, s.fd.get(), reinterpret_cast<std::byte*>(s.header) + s.offset,
                               kHeaderBytes - s.offset, &got));
        if (got == 0) {
          break;
        }
        s.offset += got;
        if (s.offset < kHeaderBytes) {
          continue;
        }
        const uint64_t size = getU64(s.header);
        if (size > r.capacity) {
          c.failed = invalidUsage("raw-tcp: a message of " + std::to_string(size) +
                                  " bytes exceeds the posted receive of " +
                                  std::to_string(r.capacity) + " bytes");
          return c.failed;
        }
        if (r.sizeKnown && r.size != size) {
          c.failed = invalidUsage("raw-tcp: sockets of one connection disagree on a message size");
          return c.failed;
        }
        r.size = size;
        r.sizeKnown = true;
      }
      const Slice slice = sliceOf(r.size, i, count);
      const size_t payloadDone = s.offset - kHeaderBytes;
      if (payloadDone < slice.length) {
        RESILIENT_TRY(recvSome(c, s.fd.get(), r.data + slice.begin + payloadDone,
                               slice.length - payloadDone, &got));
        if (got == 0) {
          break;
        }
        s.offset += got;
      }
      if (s.offset - kHeaderBytes == slice.length) {
        ++r.socketsDone;
        ++s.cursor;
        s.offset = 0;
      }
    }
  }
  return {};
}

RawTcpRequest* postRequest(CommCore& c) {
  if (c.tail - c.head >= kRing) {
    return nullptr;
  }
  RawTcpRequest& r = c.ring[c.tail % kRing];
  r.reset(&c);
  ++c.tail;
  return &r;
}

Status RawTcpRequest::test(int* done, int* sizes) {
  *done = 0;
  CommCore& c = *comm;
  if (!c.failed.ok()) {
    return c.failed;
  }
  RESILIENT_TRY(c.send ? progressSend(c) : progressRecv(c));
  if (socketsDone < static_cast<int>(c.sockets.size())) {
    return {};
  }
  *done = 1;
  if (sizes != nullptr) {
    sizes[0] = static_cast<int>(size);
  }
  inUse = false;
  while (c.head < c.tail && !c.ring[c.head % kRing].inUse) {
    ++c.head;
  }
  return {};
}

// Host memory needs no registration: a region only says regMr was called.
class RawTcpRegion final : public transport::MemoryRegion {};

Status registerHost(int type, std::unique_ptr<transport::MemoryRegion>* region) {
  region->reset();
  if (type != transport::kPtrHost) {
    return invalidUsage("raw-tcp: only host memory");
  }
  *region = std::make_unique<RawTcpRegion>();
  return {};
}

// What both comms share: the core, regMr/deregMr and close.
template <class Base>
class RawTcpComm : public Base {
 public:
  RawTcpComm(bool send, std::string peer, std::vector<FileDescriptor> sockets) {
    core_.send = send;
    core_.peer = std::move(peer);
    for (FileDescriptor& fd : sockets) {
      DataSocket s;
      s.fd = std::move(fd);
      core_.sockets.push_back(std::move(s));
    }
  }

  Status regMr(std::byte* /*data*/, size_t /*size*/, int type,
               std::unique_ptr<transport::MemoryRegion>* region) override {
    return registerHost(type, region);
  }
  Status deregMr(std::unique_ptr<transport::MemoryRegion> /*region*/) override { return {}; }
  // Closes the sockets; the comm then fails every call.
  Status close() override {
    core_.sockets.clear();
    if (core_.failed.ok()) {
      core_.failed = invalidUsage("raw-tcp: the comm is closed");
    }
    return {};
  }

 protected:
  CommCore core_;
};

class RawTcpSendComm final : public RawTcpComm<transport::SendComm> {
 public:
  RawTcpSendComm(std::string peer, std::vector<FileDescriptor> sockets)
      : RawTcpComm(true, std::move(peer), std::move(sockets)) {}

  Status isend(std::byte* data, size_t size, int /*tag*/, transport::MemoryRegion* /*region*/,
               transport::ProfilerHandle* /*phandle*/, transport::Request** request) override {
    *request = nullptr;
    if (!core_.failed.ok()) {
      return core_.failed;
    }
    RawTcpRequest* r = postRequest(core_);
    if (r == nullptr) {
      return {};
    }
    r->data = data;
    r->size = size;
    r->sizeKnown = true;
    putU64(r->header, size);
    *request = r;
    return progressSend(core_);  // start at once: no wait for the first test()
  }
};

class RawTcpRecvComm final : public RawTcpComm<transport::RecvComm> {
 public:
  RawTcpRecvComm(std::string peer, std::vector<FileDescriptor> sockets)
      : RawTcpComm(false, std::move(peer), std::move(sockets)) {}

  Status irecv(int n, std::byte** data, const size_t* sizes, const int* /*tags*/,
               transport::MemoryRegion** /*regions*/, transport::ProfilerHandle** /*phandles*/,
               transport::Request** request) override {
    *request = nullptr;
    if (!core_.failed.ok()) {
      return core_.failed;
    }
    if (n != 1) {
      return invalidUsage("raw-tcp: grouped receives are not supported (maxRecvs is 1)");
    }
    RawTcpRequest* r = postRequest(core_);
    if (r == nullptr) {
      return {};
    }
    r->data = data[0];
    r->capacity = sizes[0];
    *request = r;
    return {};
  }

  // Host memory: nothing to flush.
  Status iflush(int /*n*/, std::byte** /*data*/, const int* /*sizes*/,
                transport::MemoryRegion** /*regions*/, transport::Request** request) override {
    *request = nullptr;
    return {};
  }
};

// The listening socket, the accepted sockets whose hello is pending, and the
// sockets of connections not complete yet.
class RawTcpListener final : public transport::Listener {
 public:
  RawTcpListener(FileDescriptor fd, uint64_t token, SocketOptions options)
      : fd_(std::move(fd)), token_(token), options_(options) {}

  Status accept(transport::DeviceHandleRequest wantDeviceHandle,
                std::unique_ptr<transport::RecvComm>* comm) override;
  Status close() override {
    pending_.clear();
    groups_.clear();
    fd_ = FileDescriptor();
    return {};
  }

 private:
  FileDescriptor fd_;
  uint64_t token_ = 0;
  SocketOptions options_;
  std::vector<PendingSocket> pending_;
  std::map<uint64_t, std::vector<FileDescriptor>> groups_;  // connection id -> sockets by index
};

uint64_t randomId() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

std::string localAddressToward(const std::string& host) {
  Result<SocketAddress> target = resolveAddress(host, 9);
  if (!target.ok()) {
    return host;
  }
  FileDescriptor fd(::socket(target->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || ::connect(fd.get(), target->get(), target->length) != 0) {
    return host;
  }
  const SocketAddress local = localAddressOf(fd.get());
  return local.length != 0 ? local.hostText() : host;
}

RawTcpTransport::RawTcpTransport(RawTcpOptions options) : options_(std::move(options)) {
  options_.sockets = std::clamp(options_.sockets, 1, kRawTcpMaxSockets);
}

Status RawTcpTransport::initContext(uint64_t /*commId*/, const transport::CommConfig& /*config*/,
                                    std::unique_ptr<transport::Context>* ctx) {
  ctx->reset();  // nothing per communicator
  return {};
}

Status RawTcpTransport::devices(int* ndev) {
  *ndev = 1;
  return {};
}

Status RawTcpTransport::properties(int dev, transport::Properties* props) {
  if (dev != 0) {
    return invalidUsage("raw-tcp: device " + std::to_string(dev) + " does not exist");
  }
  *props = transport::Properties{};
  props->name = "raw-tcp";
  props->ptrSupport = transport::kPtrHost;
  props->maxRecvs = 1;
  props->maxP2pBytes = size_t{1} << 40;
  props->maxCollBytes = size_t{1} << 40;
  return {};
}

Status RawTcpTransport::listen(transport::Context* /*ctx*/, int dev, std::byte* handle,
                               std::unique_ptr<transport::Listener>* listener) {
  listener->reset();
  if (dev != 0) {
    return invalidUsage("raw-tcp: device " + std::to_string(dev) + " does not exist");
  }
  Result<FileDescriptor> fd =
      listenOn(options_.bindHost, 0, {.backlog = 1024, .reuseAddress = true});
  if (!fd.ok()) {
    return fd.status();
  }
  const SocketAddress bound = localAddressOf(fd->get());
  if (bound.length == 0) {
    return systemError("raw-tcp: getsockname");
  }
  Handle h{};
  h.magic = kHandleMagic;
  h.sockets = static_cast<uint32_t>(options_.sockets);
  h.token = options_.token;
  h.addressLength = bound.length;
  std::memcpy(h.address, &bound.storage, bound.length);
  std::memset(handle, 0, transport::kHandleSize);
  std::memcpy(handle, &h, sizeof(h));
  *listener =
      std::make_unique<RawTcpListener>(std::move(fd).value(), options_.token, socketOptions());
  return {};
}

Status RawTcpTransport::connect(transport::Context* /*ctx*/, int /*dev*/, std::byte* handle,
                                transport::DeviceHandleRequest /*wantDeviceHandle*/,
                                std::unique_ptr<transport::SendComm>* comm) {
  comm->reset();
  Handle h{};
  std::memcpy(&h, handle, sizeof(h));
  if (h.magic != kHandleMagic || h.sockets < 1 || h.sockets > kRawTcpMaxSockets ||
      h.addressLength == 0 || h.addressLength > sizeof(h.address)) {
    return invalidUsage("raw-tcp: not a raw-tcp handle");
  }
  if (h.token != options_.token) {
    return invalidUsage("raw-tcp: the handle belongs to another job (token mismatch)");
  }
  // State between polls lives in the handle (writable, stable, see transport.h).
  std::byte* stateSlot = handle + kHandleStateOffset;
  ConnectState* state = nullptr;
  std::memcpy(&state, stateSlot, kStatePointerBytes);
  SocketAddress address;
  std::memcpy(&address.storage, h.address, h.addressLength);
  address.length = h.addressLength;
  if (state == nullptr) {
    state = new ConnectState();
    state->connectionId = randomId();
    state->deadlineNs =
        monotonicNs() + static_cast<uint64_t>(options_.connectTimeoutMs) * 1000000ull;
    for (uint32_t i = 0; i < h.sockets; ++i) {
      Result<FileDescriptor> fd = openStreamSocket(address.family());
      Status s = fd.ok() ? applySocketOptions(fd->get(), socketOptions()) : fd.status();
      if (!s.ok()) {
        delete state;
        return s;
      }
      const int err = startConnect(fd->get(), address);
      if (err != 0 && err != EINPROGRESS) {
        delete state;
        return systemError("raw-tcp: connect to " + address.toString(), err);
      }
      state->sockets.push_back(std::move(*fd));
      state->helloSent.push_back(0);
      state->connected.push_back(err == 0);
    }
    std::memcpy(stateSlot, &state, kStatePointerBytes);
  }
  auto giveUp = [&](Status s) {
    delete state;
    std::memset(stateSlot, 0, kStatePointerBytes);
    return s;
  };
  bool all = true;
  for (size_t i = 0; i < state->sockets.size(); ++i) {
    const int fd = state->sockets[i].get();
    if (!state->connected[i]) {
      if (const int err = pendingSocketError(fd); err != 0) {
        return giveUp(remoteError("raw-tcp: connect failed", address.toString(), err));
      }
      if (peerAddressOf(fd).length == 0) {
        all = false;  // still in progress
        continue;
      }
      state->connected[i] = true;
    }
    if (state->helloSent[i] < kHelloBytes) {
      Hello hello{kHelloMagic,
                  kHelloVersion,
                  static_cast<uint16_t>(i),
                  static_cast<uint32_t>(state->sockets.size()),
                  0,
                  options_.token,
                  state->connectionId};
      const auto* bytes = reinterpret_cast<const char*>(&hello);
      const ssize_t w = ::send(fd, bytes + state->helloSent[i], kHelloBytes - state->helloSent[i],
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        state->helloSent[i] += static_cast<size_t>(w);
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return giveUp(remoteError("raw-tcp: sending the hello failed", address.toString(), errno));
      }
      all = all && state->helloSent[i] == kHelloBytes;
    }
  }
  if (!all) {
    if (monotonicNs() > state->deadlineNs) {
      return giveUp(timeoutError(
          "raw-tcp: no connection within " + std::to_string(options_.connectTimeoutMs) + " ms",
          address.toString()));
    }
    return {};
  }
  *comm = std::make_unique<RawTcpSendComm>(address.toString(), std::move(state->sockets));
  giveUp({});
  return {};
}

Status RawTcpListener::accept(transport::DeviceHandleRequest /*wantDeviceHandle*/,
                              std::unique_ptr<transport::RecvComm>* comm) {
  comm->reset();
  if (!fd_.valid()) {
    return invalidUsage("raw-tcp: the listener is closed");
  }
  for (;;) {
    FileDescriptor fd = acceptConnection(fd_.get());
    if (!fd.valid()) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) {
        break;
      }
      return systemError("raw-tcp: accept");
    }
    if (pending_.size() >= kMaxPendingSockets) {
      continue;  // refused: closed by FileDescriptor
    }
    RESILIENT_TRY(applySocketOptions(fd.get(), options_));
    PendingSocket p;
    p.fd = std::move(fd);
    p.sinceNs = monotonicNs();
    pending_.push_back(std::move(p));
  }
  const uint64_t now = monotonicNs();
  for (auto it = pending_.begin(); it != pending_.end();) {
    PendingSocket& p = *it;
    auto* bytes = reinterpret_cast<char*>(&p.hello);
    const ssize_t got = ::recv(p.fd.get(), bytes + p.got, kHelloBytes - p.got, MSG_DONTWAIT);
    if (got > 0) {
      p.got += static_cast<size_t>(got);
    }
    const bool broken =
        got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    bool refuse = broken || now - p.sinceNs > 10000000000ull;
    if (!refuse && p.got == kHelloBytes) {
      const Hello& h = p.hello;
      refuse = h.magic != kHelloMagic || h.version != kHelloVersion || h.token != token_ ||
               h.count < 1 || h.count > kRawTcpMaxSockets || h.index >= h.count;
      if (!refuse) {
        std::vector<FileDescriptor>& group = groups_[h.connectionId];
        group.resize(h.count);
        if (group[h.index].valid()) {
          refuse = true;
        } else {
          group[h.index] = std::move(p.fd);
        }
      }
      it = pending_.erase(it);
      continue;
    }
    if (refuse) {
      it = pending_.erase(it);  // closed: never trusted
      continue;
    }
    ++it;
  }
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    std::vector<FileDescriptor>& group = it->second;
    if (!std::all_of(group.begin(), group.end(),
                     [](const FileDescriptor& f) { return f.valid(); })) {
      continue;
    }
    const SocketAddress peer = peerAddressOf(group[0].get());
    *comm = std::make_unique<RawTcpRecvComm>(peer.length != 0 ? peer.toString() : std::string(),
                                             std::move(group));
    groups_.erase(it);
    return {};
  }
  return {};
}

}  // namespace resilient::transport::raw
