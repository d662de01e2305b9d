// The listening side of the TCP transport: a non-blocking listen socket and
// the sockets that connected to it but have not yet become part of a comm.
//
// accept() is incremental and never blocks: it accepts what the kernel has
// queued, reads partial hellos, validates complete ones (magic, version, job
// token, sizes, index, consistency with the other sockets of the same
// connection nonce), answers each with an Ack, and returns a RecvComm once
// every socket of one connection has arrived. A socket that sends garbage,
// fails a check, closes early, or does not complete within
// handshakeTimeoutMs is closed with one rate-limited WARN; a connection whose
// sockets do not all arrive in time is dropped whole.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/log.h"
#include "common/net/socket.h"
#include "common/status.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {

// Sockets a listener keeps in its handshake at once; more are closed at once.
inline constexpr size_t kMaxIncoming = 256;

class ListenComm final : public CommBase {
 public:
  // Binds `address` (its port is ignored: 0, the kernel picks) and listens.
  // `warnLimiter` rate-limits the WARNs about dropped sockets; it must outlive
  // the ListenComm.
  static Status create(const SocketAddress& address, const TcpOptions& options,
                       log::RateLimiter* warnLimiter, std::unique_ptr<ListenComm>* out);
  ~ListenComm() override;

  const SocketAddress& address() const noexcept { return address_; }
  // Sockets in the handshake right now (for tests).
  size_t incomingCount() const noexcept { return incoming_.size(); }

  // Advances every pending handshake; *out is a new RecvComm when a whole
  // connection has arrived, else null.
  Status accept(std::unique_ptr<RecvComm>* out);

 private:
  struct Incoming;

  ListenComm(FileDescriptor fd, SocketAddress address, const TcpOptions& options,
             log::RateLimiter* warnLimiter);
  void acceptQueued(uint64_t now);
  // Advances one handshake; false when the socket is to be dropped.
  bool advance(Incoming* in, uint64_t now);
  // Decides the answer to a complete hello.
  void judge(Incoming* in);
  void warnDrop(const Incoming& in, const char* reason, uint64_t now);
  Status buildComm(uint64_t nonce, std::unique_ptr<RecvComm>* out);

  FileDescriptor fd_;
  SocketAddress address_;
  TcpOptions options_;
  uint64_t tokenDigest_;
  log::RateLimiter* warnLimiter_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
};

}  // namespace resilient::transport::tcp
