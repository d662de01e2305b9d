// The connecting side of the TCP transport: opens the control socket and the
// data sockets of one connection to a listen handle, performs the handshake
// (wire.h) on each, and yields a TcpSendComm once every socket is acknowledged.
//
// Each socket checks the listener's proof of the job token before it proves
// its own: a listener without the token learns nothing it could replay, and
// is told why it was turned down.
//
// Everything is non-blocking and driven by repeated poll() calls (NCCL's
// connect polling). A refused connection (nobody listening yet) is retried
// with exponential backoff; the whole connect fails with a timeout error
// naming the address after connectTimeoutMs. A job token mismatch (either
// proof fails) fails it at once with a WARN and invalidUsage; a refusal from
// the listener (version mismatch, ...) with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net/socket.h"
#include "common/status.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/handshake_io.h"
#include "plugin/transport/tcp/handshake_proof.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {

class Connector {
 public:
  // `handleBytes`: the kHandleBytes the handle was decoded from (to recognise
  // a poll of the same connection); `hostname` goes into the hello.
  Connector(const ListenHandle& handle, const std::byte* handleBytes, const TcpOptions& options,
            const std::string& hostname, uint64_t nonce);
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // True when `handleBytes` holds the handle this connector was made for.
  bool sameHandle(const std::byte* handleBytes) const noexcept;
  const std::string& peer() const noexcept { return peer_; }

  // Advances the connection. Ok with *out null: call again. Ok with *out set:
  // connected. An error: the connection failed (the Connector is spent).
  Status poll(std::unique_ptr<SendComm>* out);

 private:
  struct Link;

  Status advance(Link* link, uint64_t now);
  Status startConnect(Link* link, uint64_t now);
  void retryLater(Link* link, uint64_t now);
  // Reads the challenge; checks the listener's proof, then answers.
  Status readChallenge(Link* link);
  Status refusalError(Refusal refusal, uint16_t listenerVersion) const;
  // The error of a handshake step that ended without completing (closed or failed).
  Status ioError(IoStep step, int err) const;
  // A WARN and the invalidUsage error of a job token mismatch: `what` failed.
  Status tokenMismatch(const std::string& what) const;

  SocketAddress address_;
  std::string peer_;
  TcpOptions options_;
  HandshakeSecret secret_;
  uint32_t listenerPid_ = 0;  // from the first challenge; 0 until then
  uint8_t handleBytes_[kHandleBytes] = {};
  uint64_t startNs_ = 0;
  uint64_t deadlineNs_ = 0;
  int refusedCount_ = 0;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace resilient::transport::tcp
