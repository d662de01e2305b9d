// The listening side of the TCP transport: a non-blocking listen socket and
// the sockets that connected to it but have not yet become part of a comm.
//
// accept() is incremental and never blocks: it accepts what the kernel has
// queued and advances every socket's handshake (wire.h): it reads the hello
// (magic, version, sizes, index), challenges the connector with a fresh nonce
// and its own proof of the job token, checks the connector's proof, then the
// socket's consistency with the other sockets of the same connection nonce,
// and answers with an Ack. It returns a TcpRecvComm once every socket of one
// connection has authenticated and been accepted.
//
// Only authenticated sockets count toward a connection: a peer without the
// token can neither complete one nor make a legitimate socket a "duplicate".
// Nor can it keep a legitimate socket out: with kMaxIncoming sockets pending,
// a newcomer takes the place of the oldest unauthenticated one (one that has
// sent nothing first). A socket that sends garbage, fails a check or its
// proof, closes early, or does not complete within handshakeTimeoutMs is
// closed with a rate-limited WARN; a connection whose sockets do not all
// arrive in time is dropped whole.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/log.h"
#include "common/net/socket.h"
#include "common/status.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/handshake_proof.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {

// Sockets a listener keeps in its handshake at once.
inline constexpr size_t kMaxIncoming = 256;

// The rate limits of the WARNs of a transport's listeners (they outlive the
// listeners): sockets dropped before they became a connection, and failed
// proofs of the job token, which a flood of the former must not hide.
struct ListenWarnLimiters {
  log::RateLimiter drops;
  log::RateLimiter proofs;
};

class TcpListener final : public Listener {
 public:
  // Binds `address` (its port is ignored: 0, the kernel picks) and listens.
  // `warnLimiters` must outlive the TcpListener.
  static Status create(const SocketAddress& address, const TcpOptions& options,
                       ListenWarnLimiters* warnLimiters, std::unique_ptr<TcpListener>* out);
  ~TcpListener() override;

  const SocketAddress& address() const noexcept { return address_; }
  // Sockets in the handshake right now (for tests).
  size_t incomingCount() const noexcept { return incoming_.size(); }

  // Advances every pending handshake; *out is a new TcpRecvComm when a whole
  // connection has arrived, else null. invalidUsage once closed.
  Status accept(DeviceHandleRequest wantDeviceHandle, std::unique_ptr<RecvComm>* out) override;
  // Closes the listen socket and every socket still in its handshake.
  Status close() override;

 private:
  struct Incoming;

  TcpListener(FileDescriptor fd, SocketAddress address, const TcpOptions& options,
              ListenWarnLimiters* warnLimiters);
  void acceptQueued(uint64_t now);
  // Closes the oldest pending socket that has not authenticated, preferring
  // one that has sent nothing; false when every pending socket has.
  bool evictUnauthenticated(uint64_t now);
  // Advances one handshake; false when the socket is to be dropped.
  bool advance(Incoming* in, uint64_t now);
  // Answers a hello at once: `reason`, and no challenge.
  void refuse(Incoming* in, Refusal reason, uint64_t now);
  // Answers a complete hello: a challenge, or a refusal.
  void challenge(Incoming* in, uint64_t now);
  // Judges a complete response; false when the socket is to be dropped at once.
  bool judgeResponse(Incoming* in, uint64_t now);
  // Whether an authenticated hello fits the accepted sockets of its connection.
  Refusal judgeConnection(const Incoming& in) const;
  // Closes the sockets whose handshake (or connection) ran out of time.
  void closeExpired(uint64_t now);
  void warnDrop(const Incoming& in, const char* reason, uint64_t now);
  void warnLost(const Incoming& in, bool closed, int err, uint64_t now);
  void warnProof(const Incoming& in, const char* what, uint64_t now);
  Status buildComm(uint64_t nonce, std::unique_ptr<RecvComm>* out);

  FileDescriptor fd_;
  SocketAddress address_;
  TcpOptions options_;
  HandshakeSecret secret_;
  ListenWarnLimiters* warnLimiters_;
  // In order of arrival: the oldest first.
  std::vector<std::unique_ptr<Incoming>> incoming_;
};

}  // namespace resilient::transport::tcp
