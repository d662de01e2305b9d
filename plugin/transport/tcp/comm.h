// Connected comms of the TCP transport: TcpSendComm and TcpRecvComm (the
// transport.h SendComm and RecvComm) over one control socket and nSocks data
// sockets.
//
// Control socket (served by the calling proxy thread inside isend/irecv/test):
// every message is announced by a frame header {tag, flags, size}; a payload of
// at most inlineBytes follows the header inline. Larger payloads are striped
// over the data sockets by the StripeEngine's helper threads, which both
// sides post in stream order.
//
// Requests (SendRequest, RecvRequest) live in preallocated rings inside their
// comm, made with it: 256 on the send side (NCCL's 32 requests times 8
// receives per grouped irecv), 32 on the receive side. A ring rather than a
// RequestPool (request_pool.h): the control stream serves requests in posting
// order, and a request is handed out again once it and every older one
// completed. A full ring answers *request = nullptr. Messages match in
// posting order; within a grouped receive the tag chooses the buffer.
//
// Errors are sticky: the first failure (socket error, end of file, protocol
// violation, helper-thread failure) is stored and every later call returns it.
// The helper threads are stopped at the failure, so user buffers are not
// touched after an error has been returned.
//
// close() stops the helper threads and shuts the sockets down without waiting
// on the peer; destroying a comm that was not closed does the same.
//
// Threads: one proxy thread at a time calls isend/irecv/test; bytesMoved(),
// linkBacklogged() and the endpoints may be read from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net/socket.h"
#include "common/status.h"
#include "plugin/transport/tcp/stripe_engine.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::tcp {

inline constexpr int kMaxRecvs = 8;
inline constexpr uint32_t kMaxSendRequests = kMaxRequests * kMaxRecvs;
inline constexpr uint32_t kMaxRecvRequests = kMaxRequests;

// What the peer told about itself in the handshake (for logs).
struct PeerInfo {
  std::string address;  // "ip:port" of the peer's control socket
  std::string hostname;
  uint32_t pid = 0;
};

// What regMr returns: host memory needs no registration, but the region is
// still an object of its own (transport.h; regMr is control path).
class HostRegion final : public MemoryRegion {};

// The sockets, helper threads and sticky error that TcpSendComm and
// TcpRecvComm share.
class TcpConnection {
 public:
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  // Starts the helper threads on the data sockets.
  Status start(std::vector<FileDescriptor> dataSockets, int nThreads);

  uint64_t bytesTotal() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  const Endpoint& localEndpoint() const noexcept { return local_; }
  const Endpoint& peerEndpoint() const noexcept { return peerEndpoint_; }
  const PeerInfo& peer() const noexcept { return peer_; }
  int dataSockets() const noexcept { return engine_.sockets(); }
  // Whether any of its sockets (control and data) has bytes the kernel has
  // not sent yet (common/net/tcp_unsent.h); any thread while the comm is open.
  bool networkBacklogged(bool* backlogged) const noexcept;
  uint32_t chunkBytes() const noexcept { return engine_.chunkBytes(); }
  // The sticky error (ok while the connection is healthy).
  const Status& error() const noexcept { return error_; }

 protected:
  TcpConnection(FileDescriptor control, PeerInfo peer, StripeEngine::Direction direction,
                uint32_t chunkBytes);
  // Shuts the sockets down (again: the comm's destructor did) and closes them.
  ~TcpConnection();

  // Stops the helper threads and shuts every socket down; never waits on the
  // peer. The destructor closes the sockets.
  void shutdownSockets() noexcept;
  // Writes the endpoints (either may be null).
  void copyEndpoints(Endpoint* local, Endpoint* peer) const noexcept;

  // Records `status` as the sticky error (the first one wins), stops the
  // helper threads, and returns it.
  Status fail(Status status);
  // A helper-thread failure, turned into the sticky error.
  Status checkHelpers();
  // Inline mode (no helper threads): moves the striped bytes on this thread.
  Status pumpInline();

  const StripeEngine::Direction direction_;
  FileDescriptor control_;
  PeerInfo peer_;
  Endpoint local_;
  Endpoint peerEndpoint_;
  std::atomic<uint64_t> bytes_{0};
  StripeEngine engine_;
  Status error_;
};

// Host memory only (kPtrHost): a HostRegion, or invalidUsage for another type.
Status registerHost(int type, std::unique_ptr<MemoryRegion>* region);

class TcpSendComm;
class TcpRecvComm;

// One posted send: a slot of its comm's ring, test() goes to the comm.
class SendRequest final : public Request {
 public:
  // Public and virtual, as for any final class with virtual functions (the
  // comm's ring destroys its requests).
  virtual ~SendRequest() = default;
  Status test(int* done, int* sizes) override;

  TcpSendComm* comm = nullptr;
  std::byte* data = nullptr;
  uint64_t size = 0;
  bool inlined = false;
  bool released = true;
  uint8_t header[16] = {};
  uint64_t controlBytes = 0;         // header + inline payload
  uint64_t controlDone = 0;          // of those, written to the control socket
  std::atomic<uint32_t> pending{0};  // striped items not yet sent
};

class TcpSendComm final : public SendComm, public TcpConnection {
 public:
  TcpSendComm(FileDescriptor control, PeerInfo peer, size_t inlineBytes, uint32_t chunkBytes);
  ~TcpSendComm() override;

  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<MemoryRegion>* region) override;
  Status deregMr(std::unique_ptr<MemoryRegion> region) override;
  Status close() override;
  bool bytesMoved(uint64_t* bytes) noexcept override;
  bool endpoints(Endpoint* local, Endpoint* peer) noexcept override;

  // The memory region and profiler handle are not used (host memory).
  Status isend(std::byte* data, size_t size, int tag, MemoryRegion* region, ProfilerHandle* phandle,
               Request** request) override;
  // Whether any of its sockets has bytes the kernel has not sent yet
  // (common/net/tcp_unsent.h).
  bool linkBacklogged(bool* backlogged) noexcept override;

  // SendRequest::test.
  Status test(SendRequest* request, int* done, int* sizes);

 private:
  Status progressControl();
  // Detects a peer that closed or reset the connection while sends wait (the
  // receiver never writes to the control socket). At most once per millisecond.
  Status checkPeer();
  SendRequest& slot(uint32_t seq) noexcept { return requests_[seq % kMaxSendRequests]; }

  const size_t inlineBytes_;
  uint32_t head_ = 0;    // oldest unreleased request
  uint32_t cursor_ = 0;  // first request not yet fully written to the control socket
  uint32_t tail_ = 0;    // next request to post
  uint64_t nextPeerCheckNs_ = 0;
  SendRequest requests_[kMaxSendRequests];
};

// One posted (grouped) receive: a slot of its comm's ring, test() goes to the comm.
class RecvRequest final : public Request {
 public:
  struct Buffer {
    std::byte* data = nullptr;
    uint64_t capacity = 0;
    int tag = 0;
    uint64_t received = 0;
    bool matched = false;
  };

  // Public and virtual, as for any final class with virtual functions (the
  // comm's ring destroys its requests).
  virtual ~RecvRequest() = default;
  Status test(int* done, int* sizes) override;

  TcpRecvComm* comm = nullptr;
  int n = 0;
  int framesDone = 0;  // messages whose header (and inline payload) were consumed
  bool released = true;
  Buffer buffers[kMaxRecvs];
  std::atomic<uint32_t> pending{0};  // striped items not yet received
};

class TcpRecvComm final : public RecvComm, public TcpConnection {
 public:
  TcpRecvComm(FileDescriptor control, PeerInfo peer, uint32_t chunkBytes);
  ~TcpRecvComm() override;

  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<MemoryRegion>* region) override;
  Status deregMr(std::unique_ptr<MemoryRegion> region) override;
  Status close() override;
  bool bytesMoved(uint64_t* bytes) noexcept override;
  bool endpoints(Endpoint* local, Endpoint* peer) noexcept override;

  // The memory regions and profiler handles are not used (host memory).
  Status irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
               MemoryRegion** regions, ProfilerHandle** phandles, Request** request) override;
  // Host memory: nothing to flush (*request stays null); the sticky error.
  Status iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                Request** request) override;

  // RecvRequest::test.
  Status test(RecvRequest* request, int* done, int* sizes);

 private:
  enum class RxState {
    kHeader,   // waiting for the next frame header
    kPayload,  // reading an inline payload into rxDest_
  };

  Status progressControl();
  // Reads what the control socket has into the staging buffer. *got is false
  // when nothing was there (would block).
  Status fillStaging(bool* got);
  Status protocolError(const std::string& what);
  RecvRequest& slot(uint32_t seq) noexcept { return requests_[seq % kMaxRecvRequests]; }

  uint32_t head_ = 0;
  uint32_t cursor_ = 0;  // the request whose messages the control stream is delivering
  uint32_t tail_ = 0;
  RxState rxState_ = RxState::kHeader;
  std::byte* rxDest_ = nullptr;
  uint64_t rxLeft_ = 0;
  std::unique_ptr<uint8_t[]> staging_;
  size_t stagingBegin_ = 0;
  size_t stagingEnd_ = 0;
  RecvRequest requests_[kMaxRecvRequests];
};

}  // namespace resilient::transport::tcp
