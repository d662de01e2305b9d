#include "plugin/transport/tcp/listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "plugin/transport/tcp/handshake_io.h"

namespace resilient::transport::tcp {
namespace {

// New sockets taken from the kernel's queue per accept() call: a flood cannot
// keep one call busy.
constexpr int kAcceptsPerCall = 64;

}  // namespace

struct TcpListener::Incoming {
  enum class State {
    kHello,      // reading the hello
    kChallenge,  // writing the challenge (or an early refusal)
    kResponse,   // reading the connector's response
    kAck,        // writing the ack (an acceptance or a refusal)
    kWaiting,    // accepted; waiting for the other sockets of its connection
  };
  FileDescriptor fd;  // invalid once the socket is to be dropped
  SocketAddress peer;
  uint64_t acceptedNs = 0;
  uint64_t deadlineNs = 0;
  State state = State::kHello;
  // The connector proved the job token: only now do the hello's connection
  // nonce and index mean anything.
  bool authenticated = false;
  uint8_t hello[kHelloBytes] = {};
  size_t helloDone = 0;
  bool helloDecoded = false;  // a complete hello of our version: `decoded` holds it
  Hello decoded;
  Refusal refusal = Refusal::kNone;
  uint8_t challenge[kChallengeBytes] = {};
  size_t challengeDone = 0;
  uint8_t response[kResponseBytes] = {};
  size_t responseDone = 0;
  uint8_t ack[kAckBytes] = {};
  size_t ackDone = 0;

  bool accepted() const noexcept { return authenticated && refusal == Refusal::kNone; }
  bool silent() const noexcept { return state == State::kHello && helloDone == 0; }
  // " (host H pid P)" as the hello says, once it is decoded.
  std::string claimedOrigin() const {
    if (!helloDecoded) {
      return {};
    }
    return " (host " + std::string(decoded.hostname) + " pid " + std::to_string(decoded.pid) +
           (authenticated ? ")" : ", as its hello says)");
  }
};

TcpListener::TcpListener(FileDescriptor fd, SocketAddress address, const TcpOptions& options,
                         ListenWarnLimiters* warnLimiters)
    : fd_(std::move(fd)),
      address_(address),
      options_(options),
      secret_(options.jobToken),
      warnLimiters_(warnLimiters) {}

TcpListener::~TcpListener() {
  (void)close();
}

Status TcpListener::close() {
  incoming_.clear();
  fd_.reset();
  return {};
}

Status TcpListener::create(const SocketAddress& address, const TcpOptions& options,
                           ListenWarnLimiters* warnLimiters, std::unique_ptr<TcpListener>* out) {
  SocketAddress bindAddress = address;
  bindAddress.setPort(0);
  Result<FileDescriptor> listening = listenOn(bindAddress, ListenOptions{});
  if (!listening.ok()) {
    return systemError("tcp: " + listening.status().message(), listening.status().sysErrno());
  }
  FileDescriptor fd = std::move(*listening);
  const SocketAddress bound = localAddressOf(fd.get());
  if (bound.length == 0) {
    return systemError("tcp: getsockname of a listen socket");
  }
  out->reset(new TcpListener(std::move(fd), bound, options, warnLimiters));
  return {};
}

void TcpListener::warnDrop(const Incoming& in, const char* reason, uint64_t now) {
  RES_WARN_LIMITED(warnLimiters_->drops, now, NCCL_NET | NCCL_INIT,
                   "tcp: listener %s dropped a connection from %s: %s%s",
                   address_.toString().c_str(), in.peer.toString().c_str(), reason,
                   in.claimedOrigin().c_str());
}

void TcpListener::warnLost(const Incoming& in, bool closed, int err, uint64_t now) {
  const std::string text = closed ? std::string("closed before completing its handshake")
                                  : "socket error during the handshake: " + errnoText(err);
  warnDrop(in, text.c_str(), now);
}

void TcpListener::warnProof(const Incoming& in, const char* what, uint64_t now) {
  RES_WARN_LIMITED(warnLimiters_->proofs, now, NCCL_NET | NCCL_INIT,
                   "tcp: listener %s refused a connection from %s%s: job token mismatch: the "
                   "connector %s (both sides must be given the same NCCL_RESILIENT_JOB_TOKEN)",
                   address_.toString().c_str(), in.peer.toString().c_str(),
                   in.claimedOrigin().c_str(), what);
}

bool TcpListener::evictUnauthenticated(uint64_t now) {
  // incoming_ is in order of arrival: the first match is the oldest.
  auto victim =
      std::find_if(incoming_.begin(), incoming_.end(), [](const auto& in) { return in->silent(); });
  if (victim == incoming_.end()) {
    victim = std::find_if(incoming_.begin(), incoming_.end(),
                          [](const auto& in) { return !in->authenticated; });
  }
  if (victim == incoming_.end()) {
    return false;
  }
  const Incoming& in = **victim;
  const std::string text =
      std::string("evicted after ") + std::to_string((now - in.acceptedNs) / 1000000) + " ms " +
      (in.silent() ? "without a byte" : "without authenticating") +
      " to make room for a newcomer (" + std::to_string(incoming_.size()) + " handshakes pending)";
  warnDrop(in, text.c_str(), now);
  incoming_.erase(victim);
  return true;
}

void TcpListener::acceptQueued(uint64_t now) {
  for (int i = 0; i < kAcceptsPerCall; ++i) {
    SocketAddress peer;
    FileDescriptor sock = acceptConnection(fd_.get(), &peer);
    if (!sock.valid()) {
      const int err = errno;
      if (err == ECONNABORTED) {
        continue;
      }
      if (err != EAGAIN && err != EWOULDBLOCK) {
        const std::string text = errnoText(err);
        RES_WARN_LIMITED(warnLimiters_->drops, now, NCCL_NET | NCCL_INIT,
                         "tcp: accept on listener %s failed: %s", address_.toString().c_str(),
                         text.c_str());
      }
      return;
    }
    if (incoming_.size() >= kMaxIncoming && !evictUnauthenticated(now)) {
      RES_WARN_LIMITED(warnLimiters_->drops, now, NCCL_NET | NCCL_INIT,
                       "tcp: listener %s dropped a connection from %s: %zu authenticated "
                       "handshakes pending",
                       address_.toString().c_str(), peer.toString().c_str(), incoming_.size());
      continue;
    }
    if (!applySocketOptions(sock.get(), socketOptions(options_)).ok()) {
      continue;  // a socket we cannot configure is not worth a comm
    }
    auto in = std::make_unique<Incoming>();
    in->fd = std::move(sock);
    in->peer = peer;
    in->acceptedNs = now;
    in->deadlineNs = now + static_cast<uint64_t>(options_.handshakeTimeoutMs) * 1000000ull;
    incoming_.push_back(std::move(in));
  }
}

void TcpListener::refuse(Incoming* in, Refusal reason, uint64_t now) {
  in->refusal = reason;
  in->state = Incoming::State::kChallenge;
  Challenge c;
  c.refusal = reason;
  c.pid = static_cast<uint32_t>(::getpid());
  encodeChallenge(c, in->challenge);
  const std::string text = std::string("refused: ") + refusalName(reason);
  warnDrop(*in, text.c_str(), now);
}

void TcpListener::challenge(Incoming* in, uint64_t now) {
  const Refusal refusal = decodeHello(in->hello, &in->decoded);
  in->helloDecoded = true;
  if (refusal != Refusal::kNone) {
    refuse(in, refusal, now);
    return;
  }
  Challenge c;
  c.pid = static_cast<uint32_t>(::getpid());
  c.nonce = auth::freshNonce();
  encodeChallenge(c, in->challenge);
  // The proof covers the bytes before it: encode them, prove, encode again.
  c.proof = secret_.listenerProof(in->hello, in->challenge);
  encodeChallenge(c, in->challenge);
  in->state = Incoming::State::kChallenge;
}

Refusal TcpListener::judgeConnection(const Incoming& in) const {
  for (const auto& other : incoming_) {
    if (other.get() == &in || !other->accepted() || other->decoded.nonce != in.decoded.nonce) {
      continue;
    }
    if (other->decoded.socketIndex == in.decoded.socketIndex) {
      return Refusal::kDuplicate;
    }
    if (other->decoded.nSockets != in.decoded.nSockets ||
        other->decoded.chunkBytes != in.decoded.chunkBytes) {
      return Refusal::kBadHello;
    }
  }
  return Refusal::kNone;
}

bool TcpListener::judgeResponse(Incoming* in, uint64_t now) {
  Response response;
  if (!decodeResponse(in->response, &response)) {
    warnDrop(*in, "answered the challenge with something that is not a response", now);
    return false;
  }
  if (response.verdict == Verdict::kNotProven) {
    warnProof(*in, "could not verify this listener's proof of the job token", now);
    return false;
  }
  if (!secret_.connectorProofHolds(in->hello, in->challenge, response.proof)) {
    warnProof(*in, "could not prove the job token", now);
    in->refusal = Refusal::kBadToken;
  } else {
    in->authenticated = true;
    in->refusal = judgeConnection(*in);
    if (in->refusal != Refusal::kNone) {
      const std::string text = std::string("refused: ") + refusalName(in->refusal);
      warnDrop(*in, text.c_str(), now);
    }
  }
  encodeAck(Ack{in->refusal}, in->ack);
  in->state = Incoming::State::kAck;
  return true;
}

bool TcpListener::advance(Incoming* in, uint64_t now) {
  int err = 0;
  if (in->state == Incoming::State::kHello) {
    const IoStep step = receiveStep(in->fd.get(), in->hello, kHelloBytes, &in->helloDone, &err);
    Refusal reason = Refusal::kNone;
    bool isOurs = true;
    if (!checkHelloPrefix(in->hello, in->helloDone, &reason, &isOurs)) {
      if (!isOurs) {
        warnDrop(*in, "sent data that is not a resilient TCP handshake", now);
        return false;
      }
      refuse(in, reason, now);
    } else if (step == IoStep::kComplete) {
      challenge(in, now);
    } else if (step == IoStep::kPending) {
      return true;
    } else {
      warnLost(*in, step == IoStep::kClosed, err, now);
      return false;
    }
  }
  if (in->state == Incoming::State::kChallenge) {
    const IoStep step =
        sendStep(in->fd.get(), in->challenge, kChallengeBytes, &in->challengeDone, &err);
    if (step == IoStep::kPending) {
      return true;
    }
    if (step != IoStep::kComplete) {
      if (in->refusal == Refusal::kNone) {
        warnLost(*in, false, err, now);
      }
      return false;
    }
    if (in->refusal != Refusal::kNone) {
      return false;  // refused and told so: close
    }
    in->state = Incoming::State::kResponse;
  }
  if (in->state == Incoming::State::kResponse) {
    const IoStep step =
        receiveStep(in->fd.get(), in->response, kResponseBytes, &in->responseDone, &err);
    if (step == IoStep::kPending) {
      return true;
    }
    if (step != IoStep::kComplete) {
      warnLost(*in, step == IoStep::kClosed, err, now);
      return false;
    }
    if (!judgeResponse(in, now)) {
      return false;
    }
  }
  if (in->state == Incoming::State::kAck) {
    const IoStep step = sendStep(in->fd.get(), in->ack, kAckBytes, &in->ackDone, &err);
    if (step == IoStep::kPending) {
      return true;
    }
    if (step != IoStep::kComplete) {
      if (in->refusal == Refusal::kNone) {
        warnLost(*in, false, err, now);
      }
      return false;
    }
    if (in->refusal != Refusal::kNone) {
      return false;  // refused and told so: close
    }
    in->state = Incoming::State::kWaiting;
  }
  return true;
}

void TcpListener::closeExpired(uint64_t now) {
  // A socket alone: its own handshake. An accepted one: its whole connection,
  // whose other sockets did not all arrive.
  std::unordered_map<uint64_t, const Incoming*> expired;
  for (auto& in : incoming_) {
    if (!in->fd.valid() || now < in->deadlineNs) {
      continue;
    }
    if (in->state == Incoming::State::kWaiting) {
      expired.emplace(in->decoded.nonce, in.get());
      continue;
    }
    const std::string text =
        "no complete handshake within " + std::to_string(options_.handshakeTimeoutMs) + " ms";
    warnDrop(*in, text.c_str(), now);
    in->fd.reset();
  }
  if (expired.empty()) {
    return;
  }
  std::unordered_map<uint64_t, size_t> arrived;
  for (const auto& in : incoming_) {
    if (in->fd.valid() && in->state == Incoming::State::kWaiting &&
        expired.count(in->decoded.nonce) != 0) {
      ++arrived[in->decoded.nonce];
    }
  }
  for (const auto& [nonce, in] : expired) {
    const std::string text = "only " + std::to_string(arrived[nonce]) + " of " +
                             std::to_string(in->decoded.nSockets) + " sockets arrived within " +
                             std::to_string(options_.handshakeTimeoutMs) + " ms";
    warnDrop(*in, text.c_str(), now);
  }
  for (auto& in : incoming_) {
    if (in->accepted() && expired.count(in->decoded.nonce) != 0) {
      in->fd.reset();
    }
  }
}

Status TcpListener::buildComm(uint64_t nonce, std::unique_ptr<RecvComm>* out) {
  const Hello first = [&] {
    for (const auto& in : incoming_) {
      if (in->state == Incoming::State::kWaiting && in->decoded.nonce == nonce &&
          in->decoded.socketIndex == 0) {
        return in->decoded;
      }
    }
    return Hello{};
  }();
  const int nSockets = first.nSockets;
  std::vector<FileDescriptor> sockets(static_cast<size_t>(nSockets));
  SocketAddress peerAddress;
  std::erase_if(incoming_, [&](std::unique_ptr<Incoming>& in) {
    if (in->state != Incoming::State::kWaiting || in->decoded.nonce != nonce) {
      return false;
    }
    if (in->decoded.socketIndex == 0) {
      peerAddress = in->peer;
    }
    sockets[in->decoded.socketIndex] = std::move(in->fd);
    return true;
  });
  PeerInfo peer{peerAddress.toString(), first.hostname, first.pid};
  auto comm =
      std::make_unique<TcpRecvComm>(std::move(sockets[0]), std::move(peer), first.chunkBytes);
  sockets.erase(sockets.begin());
  RESILIENT_TRY(comm->start(std::move(sockets), options_.nThreads));
  RES_INFO(NCCL_NET | NCCL_INIT,
           "tcp: accepted a connection from %s (host %s pid %u) on %s: %d data sockets, "
           "chunk %u bytes",
           comm->peer().address.c_str(), comm->peer().hostname.c_str(), comm->peer().pid,
           address_.toString().c_str(), comm->dataSockets(), comm->chunkBytes());
  *out = std::move(comm);
  return {};
}

Status TcpListener::accept(DeviceHandleRequest /*wantDeviceHandle*/,
                           std::unique_ptr<RecvComm>* out) {
  out->reset();
  if (!fd_.valid()) {
    return invalidUsage("tcp: accept on a closed listener");
  }
  const uint64_t now = monotonicNs();
  acceptQueued(now);
  // A pass to advance, one to check deadlines, one to drop: a socket costs
  // O(1) per call until it authenticates (it is then compared with the
  // accepted ones once), so sockets that withhold or garble their handshake
  // cost O(pending sockets).
  for (auto& in : incoming_) {
    if (!advance(in.get(), now)) {
      in->fd.reset();
    }
  }
  closeExpired(now);
  std::erase_if(incoming_, [](const auto& in) { return !in->fd.valid(); });
  // A connection whose sockets have all arrived becomes a comm.
  std::unordered_map<uint64_t, size_t> arrived;
  for (const auto& in : incoming_) {
    if (in->state == Incoming::State::kWaiting) {
      ++arrived[in->decoded.nonce];
    }
  }
  for (const auto& in : incoming_) {
    if (in->state == Incoming::State::kWaiting && in->decoded.socketIndex == 0 &&
        arrived[in->decoded.nonce] == in->decoded.nSockets) {
      return buildComm(in->decoded.nonce, out);
    }
  }
  return {};
}

}  // namespace resilient::transport::tcp
