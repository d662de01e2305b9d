#include "plugin/transport/tcp/comm.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/net/tcp_unsent.h"
#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {
namespace {

// Header and payload iovecs one control-socket write gathers at most.
constexpr int kMaxControlIov = 32;
// Staging buffer of the receiving control socket: small frames arrive many at
// a time in one recv().
constexpr size_t kStagingBytes = 16u << 10;
// Inline payload left at or above which the receiver reads straight into the
// user buffer instead of through the staging buffer.
constexpr uint64_t kDirectReadBytes = 4u << 10;
constexpr uint64_t kPeerCheckIntervalNs = 1000000;

}  // namespace

// ---- TcpConnection ------------------------------------------------------------

TcpConnection::TcpConnection(FileDescriptor control, PeerInfo peer,
                             StripeEngine::Direction direction, uint32_t chunkBytes)
    : direction_(direction),
      control_(std::move(control)),
      peer_(std::move(peer)),
      local_(toEndpoint(localAddressOf(control_.get()))),
      peerEndpoint_(toEndpoint(peerAddressOf(control_.get()))),
      engine_(direction, chunkBytes, &bytes_) {}

TcpConnection::~TcpConnection() {
  shutdownSockets();
}

Status TcpConnection::start(std::vector<FileDescriptor> dataSockets, int nThreads) {
  return engine_.start(std::move(dataSockets), nThreads);
}

bool TcpConnection::networkBacklogged(bool* backlogged) const noexcept {
  uint64_t unsent = 0;
  if (!net::tcpUnsentBytes(control_.get(), &unsent)) {
    return false;
  }
  for (int lane = 0; lane < engine_.sockets() && unsent == 0; ++lane) {
    (void)net::tcpUnsentBytes(engine_.socketFd(lane), &unsent);
  }
  *backlogged = unsent > 0;
  return true;
}

void TcpConnection::copyEndpoints(Endpoint* local, Endpoint* peer) const noexcept {
  if (local != nullptr) {
    *local = local_;
  }
  if (peer != nullptr) {
    *peer = peerEndpoint_;
  }
}

void TcpConnection::shutdownSockets() noexcept {
  if (control_.valid()) {
    ::shutdown(control_.get(), SHUT_RDWR);
  }
  engine_.stop();
}

Status TcpConnection::fail(Status status) {
  if (error_.ok()) {
    error_ = std::move(status);
    // A failed comm goes quiet at once: once its error is reported, no helper
    // thread touches a user buffer any more (the caller may free them).
    engine_.stop();
  }
  return error_;
}

Status TcpConnection::checkHelpers() {
  int err = 0;
  int socket = -1;
  if (!engine_.failed(&err, &socket)) {
    return {};
  }
  const std::string what =
      std::string(direction_ == StripeEngine::Direction::kSend ? "send" : "receive") +
      " on data socket " + std::to_string(socket + 1);
  return fail(connectionError(err, what.c_str(), peer_.address));
}

Status TcpConnection::pumpInline() {
  if (!engine_.inlineMode()) {
    return {};
  }
  engine_.pump();
  return checkHelpers();
}

Status registerHost(int type, std::unique_ptr<MemoryRegion>* region) {
  region->reset();
  if (type != kPtrHost) {
    return invalidUsage("tcp: only host memory can be registered (type " + std::to_string(type) +
                        ")");
  }
  *region = std::make_unique<HostRegion>();
  return {};
}

// ---- TcpSendComm --------------------------------------------------------------

Status SendRequest::test(int* done, int* sizes) {
  return comm->test(this, done, sizes);
}

TcpSendComm::TcpSendComm(FileDescriptor control, PeerInfo peer, size_t inlineBytes,
                         uint32_t chunkBytes)
    : TcpConnection(std::move(control), std::move(peer), StripeEngine::Direction::kSend,
                    chunkBytes),
      inlineBytes_(inlineBytes) {
  for (SendRequest& r : requests_) {
    r.comm = this;
  }
}

// The helper threads stop before the requests they count down go away.
TcpSendComm::~TcpSendComm() {
  shutdownSockets();
}

Status TcpSendComm::regMr(std::byte* data, size_t size, int type,
                          std::unique_ptr<MemoryRegion>* region) {
  (void)data;
  (void)size;
  return registerHost(type, region);
}

Status TcpSendComm::deregMr(std::unique_ptr<MemoryRegion> region) {
  region.reset();
  return {};
}

Status TcpSendComm::close() {
  shutdownSockets();
  return {};
}

bool TcpSendComm::bytesMoved(uint64_t* bytes) noexcept {
  *bytes = bytesTotal();
  return true;
}

bool TcpSendComm::endpoints(Endpoint* local, Endpoint* peer) noexcept {
  copyEndpoints(local, peer);
  return true;
}

bool TcpSendComm::linkBacklogged(bool* backlogged) noexcept {
  return networkBacklogged(backlogged);
}

Status TcpSendComm::isend(std::byte* data, size_t size, int tag, MemoryRegion* region,
                          ProfilerHandle* phandle, Request** request) {
  (void)region;
  (void)phandle;
  *request = nullptr;
  if (!error_.ok()) {
    return error_;
  }
  RESILIENT_TRY(checkHelpers());
  if (size > kMaxMessageBytes) {
    return invalidUsage("tcp: isend of " + std::to_string(size) +
                        " bytes exceeds the 1 GiB message limit (maxP2pBytes)");
  }
  if (size > 0 && data == nullptr) {
    return invalidUsage("tcp: isend of " + std::to_string(size) + " bytes from a null buffer");
  }
  if (tail_ - head_ == kMaxSendRequests) {
    return {};  // full: NCCL retries
  }
  SendRequest& r = slot(tail_);
  r.data = data;
  r.size = size;
  r.inlined = size <= inlineBytes_;
  r.released = false;
  encodeFrame(FrameHeader{tag, r.inlined ? kFrameInline : uint8_t{0}, size}, r.header);
  r.controlBytes = kFrameHeaderBytes + (r.inlined ? size : 0);
  r.controlDone = 0;
  if (r.inlined) {
    r.pending.store(0, std::memory_order_relaxed);
  } else {
    r.pending.store(engine_.itemCount(size), std::memory_order_relaxed);
    if (!engine_.postMessage(r.data, size, &r.pending)) {
      return fail(internalError("tcp: helper ring overflow on a send comm to " + peer_.address));
    }
  }
  ++tail_;
  RESILIENT_TRY(progressControl());
  *request = &r;
  return {};
}

Status TcpSendComm::progressControl() {
  while (cursor_ != tail_) {
    iovec iov[kMaxControlIov];
    int nIov = 0;
    for (uint32_t seq = cursor_; seq != tail_ && nIov + 2 <= kMaxControlIov; ++seq) {
      SendRequest& r = slot(seq);
      const uint64_t done = r.controlDone;
      if (done < kFrameHeaderBytes) {
        iov[nIov++] = iovec{r.header + done, kFrameHeaderBytes - done};
      }
      if (r.inlined) {
        const uint64_t payloadDone = done > kFrameHeaderBytes ? done - kFrameHeaderBytes : 0;
        if (payloadDone < r.size) {
          iov[nIov++] = iovec{r.data + payloadDone, r.size - payloadDone};
        }
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(nIov);
    const ssize_t n = ::sendmsg(control_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        return {};
      }
      if (err == EINTR) {
        continue;
      }
      return fail(connectionError(err, "send on the control socket", peer_.address));
    }
    uint64_t written = static_cast<uint64_t>(n);
    uint64_t payload = 0;
    while (written > 0) {
      SendRequest& r = slot(cursor_);
      const uint64_t take = std::min(written, r.controlBytes - r.controlDone);
      const uint64_t headerLeft =
          r.controlDone < kFrameHeaderBytes ? kFrameHeaderBytes - r.controlDone : 0;
      payload += take > headerLeft ? take - headerLeft : 0;
      r.controlDone += take;
      written -= take;
      if (r.controlDone == r.controlBytes) {
        ++cursor_;
      }
    }
    // Requests with nothing left (possible only right after a partial write).
    while (cursor_ != tail_ && slot(cursor_).controlDone == slot(cursor_).controlBytes) {
      ++cursor_;
    }
    bytes_.fetch_add(payload, std::memory_order_relaxed);
  }
  return {};
}

Status TcpSendComm::checkPeer() {
  const uint64_t now = monotonicNs();
  if (now < nextPeerCheckNs_) {
    return {};
  }
  nextPeerCheckNs_ = now + kPeerCheckIntervalNs;
  uint8_t byte = 0;
  const ssize_t n = ::recv(control_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0) {
    return fail(connectionError(0, "send", peer_.address));
  }
  if (n > 0) {
    return fail(
        remoteError("protocol error: the receiver wrote to the control socket", peer_.address));
  }
  const int err = errno;
  if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
    return fail(connectionError(err, "send", peer_.address));
  }
  return {};
}

Status TcpSendComm::test(SendRequest* request, int* done, int* sizes) {
  *done = 0;
  if (!error_.ok()) {
    return error_;
  }
  RESILIENT_TRY(checkHelpers());
  if (request->released) {
    return internalError("tcp: test() on a send request that already completed");
  }
  if (cursor_ != tail_) {
    RESILIENT_TRY(progressControl());
  }
  RESILIENT_TRY(pumpInline());
  if (request->controlDone != request->controlBytes ||
      request->pending.load(std::memory_order_acquire) != 0) {
    return checkPeer();
  }
  *done = 1;
  if (sizes != nullptr) {
    sizes[0] = static_cast<int>(request->size);
  }
  request->released = true;
  while (head_ != tail_ && slot(head_).released) {
    ++head_;
  }
  return {};
}

// ---- TcpRecvComm --------------------------------------------------------------

Status RecvRequest::test(int* done, int* sizes) {
  return comm->test(this, done, sizes);
}

TcpRecvComm::TcpRecvComm(FileDescriptor control, PeerInfo peer, uint32_t chunkBytes)
    : TcpConnection(std::move(control), std::move(peer), StripeEngine::Direction::kRecv,
                    chunkBytes),
      staging_(new uint8_t[kStagingBytes]) {
  for (RecvRequest& r : requests_) {
    r.comm = this;
  }
}

// The helper threads stop before the requests and buffers they use go away.
TcpRecvComm::~TcpRecvComm() {
  shutdownSockets();
}

Status TcpRecvComm::regMr(std::byte* data, size_t size, int type,
                          std::unique_ptr<MemoryRegion>* region) {
  (void)data;
  (void)size;
  return registerHost(type, region);
}

Status TcpRecvComm::deregMr(std::unique_ptr<MemoryRegion> region) {
  region.reset();
  return {};
}

Status TcpRecvComm::close() {
  shutdownSockets();
  return {};
}

bool TcpRecvComm::bytesMoved(uint64_t* bytes) noexcept {
  *bytes = bytesTotal();
  return true;
}

bool TcpRecvComm::endpoints(Endpoint* local, Endpoint* peer) noexcept {
  copyEndpoints(local, peer);
  return true;
}

Status TcpRecvComm::iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                           Request** request) {
  (void)n;
  (void)data;
  (void)sizes;
  (void)regions;
  *request = nullptr;  // host memory: nothing to flush
  return error_;
}

Status TcpRecvComm::irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
                          MemoryRegion** regions, ProfilerHandle** phandles, Request** request) {
  (void)regions;
  (void)phandles;
  *request = nullptr;
  if (!error_.ok()) {
    return error_;
  }
  RESILIENT_TRY(checkHelpers());
  if (n < 1 || n > kMaxRecvs) {
    return invalidUsage("tcp: irecv of " + std::to_string(n) + " buffers (1 to " +
                        std::to_string(kMaxRecvs) + " allowed)");
  }
  if (tail_ - head_ == kMaxRecvRequests) {
    return {};  // full: NCCL retries
  }
  RecvRequest& r = slot(tail_);
  r.n = n;
  r.framesDone = 0;
  r.released = false;
  r.pending.store(0, std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    r.buffers[i] = RecvRequest::Buffer{data[i], sizes[i], tags[i], 0, false};
  }
  ++tail_;
  RESILIENT_TRY(progressControl());
  *request = &r;
  return {};
}

Status TcpRecvComm::protocolError(const std::string& what) {
  return fail(remoteError("protocol error: " + what, peer_.address));
}

Status TcpRecvComm::fillStaging(bool* got) {
  *got = false;
  if (stagingBegin_ == stagingEnd_) {
    stagingBegin_ = stagingEnd_ = 0;
  } else if (stagingBegin_ > 0) {
    std::memmove(staging_.get(), staging_.get() + stagingBegin_, stagingEnd_ - stagingBegin_);
    stagingEnd_ -= stagingBegin_;
    stagingBegin_ = 0;
  }
  for (;;) {
    const ssize_t n = ::recv(control_.get(), staging_.get() + stagingEnd_,
                             kStagingBytes - stagingEnd_, MSG_DONTWAIT);
    if (n > 0) {
      stagingEnd_ += static_cast<size_t>(n);
      *got = true;
      return {};
    }
    if (n == 0) {
      return fail(connectionError(0, "receive on the control socket", peer_.address));
    }
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      return {};
    }
    if (err != EINTR) {
      return fail(connectionError(err, "receive on the control socket", peer_.address));
    }
  }
}

Status TcpRecvComm::progressControl() {
  while (cursor_ != tail_) {
    RecvRequest& r = slot(cursor_);
    if (r.framesDone == r.n) {
      ++cursor_;
      continue;
    }
    if (rxState_ == RxState::kHeader) {
      if (stagingEnd_ - stagingBegin_ < kFrameHeaderBytes) {
        bool got = false;
        RESILIENT_TRY(fillStaging(&got));
        if (!got) {
          return {};
        }
        continue;
      }
      FrameHeader frame;
      const FrameError fe = decodeFrame(staging_.get() + stagingBegin_, &frame);
      if (fe != FrameError::kNone) {
        return protocolError(std::string(frameErrorName(fe)) + " on the control socket");
      }
      stagingBegin_ += kFrameHeaderBytes;
      RecvRequest::Buffer* buffer = nullptr;
      bool duplicate = false;
      for (int i = 0; i < r.n; ++i) {
        if (r.buffers[i].tag == frame.tag) {
          if (!r.buffers[i].matched) {
            buffer = &r.buffers[i];
            break;
          }
          duplicate = true;
        }
      }
      if (buffer == nullptr) {
        return protocolError(duplicate ? "a second message with tag " + std::to_string(frame.tag) +
                                             " within one grouped receive"
                                       : "a message with tag " + std::to_string(frame.tag) +
                                             " matches no posted receive buffer");
      }
      if (frame.size > buffer->capacity) {
        return protocolError("a message of " + std::to_string(frame.size) + " bytes with tag " +
                             std::to_string(frame.tag) + " exceeds the posted buffer of " +
                             std::to_string(buffer->capacity) + " bytes");
      }
      buffer->matched = true;
      buffer->received = frame.size;
      if ((frame.flags & kFrameInline) == 0) {
        r.pending.fetch_add(engine_.itemCount(frame.size), std::memory_order_relaxed);
        if (!engine_.postMessage(buffer->data, frame.size, &r.pending)) {
          return fail(
              internalError("tcp: helper ring overflow on a receive comm from " + peer_.address));
        }
        ++r.framesDone;
      } else if (frame.size == 0) {
        ++r.framesDone;
      } else {
        rxState_ = RxState::kPayload;
        rxDest_ = buffer->data;
        rxLeft_ = frame.size;
      }
      continue;
    }
    // Inline payload: first what the staging buffer holds, then straight from the socket.
    if (stagingBegin_ < stagingEnd_) {
      const uint64_t take = std::min<uint64_t>(rxLeft_, stagingEnd_ - stagingBegin_);
      std::memcpy(rxDest_, staging_.get() + stagingBegin_, take);
      stagingBegin_ += take;
      rxDest_ += take;
      rxLeft_ -= take;
      bytes_.fetch_add(take, std::memory_order_relaxed);
    } else if (rxLeft_ >= kDirectReadBytes) {
      const ssize_t n = ::recv(control_.get(), rxDest_, rxLeft_, MSG_DONTWAIT);
      if (n > 0) {
        rxDest_ += n;
        rxLeft_ -= static_cast<uint64_t>(n);
        bytes_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      } else if (n == 0) {
        return fail(connectionError(0, "receive on the control socket", peer_.address));
      } else {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) {
          return {};
        }
        if (err != EINTR) {
          return fail(connectionError(err, "receive on the control socket", peer_.address));
        }
      }
    } else {
      bool got = false;
      RESILIENT_TRY(fillStaging(&got));
      if (!got) {
        return {};
      }
    }
    if (rxLeft_ == 0) {
      rxState_ = RxState::kHeader;
      ++r.framesDone;
    }
  }
  return {};
}

Status TcpRecvComm::test(RecvRequest* request, int* done, int* sizes) {
  *done = 0;
  if (!error_.ok()) {
    return error_;
  }
  RESILIENT_TRY(checkHelpers());
  if (request->released) {
    return internalError("tcp: test() on a receive request that already completed");
  }
  if (cursor_ != tail_) {
    RESILIENT_TRY(progressControl());
  }
  RESILIENT_TRY(pumpInline());
  if (request->framesDone != request->n || request->pending.load(std::memory_order_acquire) != 0) {
    return {};
  }
  *done = 1;
  if (sizes != nullptr) {
    for (int i = 0; i < request->n; ++i) {
      sizes[i] = static_cast<int>(request->buffers[i].received);
    }
  }
  request->released = true;
  while (head_ != tail_ && slot(head_).released) {
    ++head_;
  }
  return {};
}

}  // namespace resilient::transport::tcp
