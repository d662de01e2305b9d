// The connecting side of the TCP transport: opens the control socket and the
// data sockets of one connection to a listen handle, performs the handshake
// on each, and yields a SendComm once every socket is acknowledged.
//
// Everything is non-blocking and driven by repeated poll() calls (NCCL's
// connect polling). A refused connection (nobody listening yet) is retried
// with exponential backoff; the whole connect fails with a timeout error
// naming the address after connectTimeoutMs. A refusal from the listener
// (job token or version mismatch, ...) fails it at once with the reason.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net/socket.h"
#include "common/status.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {

class Connector {
 public:
  // `handleBytes`: the kHandleBytes the handle was decoded from (to recognise
  // a poll of the same connection); `hostname` goes into the hello.
  Connector(const ListenHandle& handle, const void* handleBytes, const TcpOptions& options,
            const std::string& hostname, uint64_t nonce);
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // True when `handleBytes` holds the handle this connector was made for.
  bool sameHandle(const void* handleBytes) const noexcept;
  const std::string& peer() const noexcept { return peer_; }

  // Advances the connection. Ok with *out null: call again. Ok with *out set:
  // connected. An error: the connection failed (the Connector is spent).
  Status poll(std::unique_ptr<SendComm>* out);

 private:
  struct Link;

  Status advance(Link* link, uint64_t now);
  Status startConnect(Link* link, uint64_t now);
  void retryLater(Link* link, uint64_t now);
  Status refusalError(const Ack& ack) const;

  SocketAddress address_;
  std::string peer_;
  TcpOptions options_;
  uint8_t handleBytes_[kHandleBytes] = {};
  uint64_t startNs_ = 0;
  uint64_t deadlineNs_ = 0;
  int refusedCount_ = 0;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace resilient::transport::tcp
