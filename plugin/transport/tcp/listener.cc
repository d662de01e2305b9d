#include "plugin/transport/tcp/listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "common/clock.h"
#include "common/token_digest.h"

namespace resilient::transport::tcp {
namespace {

// New sockets taken from the kernel's queue per accept() call: a flood cannot
// keep one call busy.
constexpr int kAcceptsPerCall = 64;

}  // namespace

struct ListenComm::Incoming {
  enum class State {
    kHello,    // reading the hello
    kAnswer,   // writing the ack (an acceptance or a refusal)
    kWaiting,  // accepted; waiting for the other sockets of its connection
  };
  FileDescriptor fd;
  SocketAddress peer;
  uint64_t deadlineNs = 0;
  State state = State::kHello;
  uint8_t hello[kHelloBytes] = {};
  size_t helloDone = 0;
  Hello decoded;
  Refusal refusal = Refusal::kNone;
  uint8_t ack[kAckBytes] = {};
  size_t ackDone = 0;
};

ListenComm::ListenComm(FileDescriptor fd, SocketAddress address, const TcpOptions& options,
                       log::RateLimiter* warnLimiter)
    : CommBase(CommKind::kListen),
      fd_(std::move(fd)),
      address_(address),
      options_(options),
      tokenDigest_(tokenDigest(options.jobToken)),
      warnLimiter_(warnLimiter) {}

ListenComm::~ListenComm() = default;

Status ListenComm::create(const SocketAddress& address, const TcpOptions& options,
                          log::RateLimiter* warnLimiter, std::unique_ptr<ListenComm>* out) {
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
  out->reset(new ListenComm(std::move(fd), bound, options, warnLimiter));
  return {};
}

void ListenComm::warnDrop(const Incoming& in, const char* reason, uint64_t now) {
  RES_WARN_LIMITED(*warnLimiter_, now, NCCL_NET | NCCL_INIT,
                   "tcp: listener %s dropped a connection from %s: %s", address_.toString().c_str(),
                   in.peer.toString().c_str(), reason);
}

void ListenComm::acceptQueued(uint64_t now) {
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
        RES_WARN_LIMITED(*warnLimiter_, now, NCCL_NET | NCCL_INIT,
                         "tcp: accept on listener %s failed: %s", address_.toString().c_str(),
                         text.c_str());
      }
      return;
    }
    if (incoming_.size() >= kMaxIncoming) {
      RES_WARN_LIMITED(*warnLimiter_, now, NCCL_NET | NCCL_INIT,
                       "tcp: listener %s dropped a connection from %s: %zu handshakes pending",
                       address_.toString().c_str(), peer.toString().c_str(), incoming_.size());
      continue;
    }
    if (!applySocketOptions(sock.get(), socketOptions(options_)).ok()) {
      continue;  // a socket we cannot configure is not worth a comm
    }
    auto in = std::make_unique<Incoming>();
    in->fd = std::move(sock);
    in->peer = peer;
    in->deadlineNs = now + static_cast<uint64_t>(options_.handshakeTimeoutMs) * 1000000ull;
    incoming_.push_back(std::move(in));
  }
}

void ListenComm::judge(Incoming* in) {
  Refusal refusal = decodeHello(in->hello, tokenDigest_, &in->decoded);
  if (refusal == Refusal::kNone) {
    for (const auto& other : incoming_) {
      const bool accepted =
          other->state == Incoming::State::kWaiting ||
          (other->state == Incoming::State::kAnswer && other->refusal == Refusal::kNone);
      if (other.get() == in || !accepted || other->decoded.nonce != in->decoded.nonce) {
        continue;
      }
      if (other->decoded.socketIndex == in->decoded.socketIndex) {
        refusal = Refusal::kDuplicate;
        break;
      }
      if (other->decoded.nSockets != in->decoded.nSockets ||
          other->decoded.chunkBytes != in->decoded.chunkBytes) {
        refusal = Refusal::kBadHello;
        break;
      }
    }
  }
  in->refusal = refusal;
  in->state = Incoming::State::kAnswer;
  encodeAck(Ack{kProtocolVersion, refusal, static_cast<uint32_t>(::getpid())}, in->ack);
}

bool ListenComm::advance(Incoming* in, uint64_t now) {
  if (in->state == Incoming::State::kHello) {
    const ssize_t n =
        ::recv(in->fd.get(), in->hello + in->helloDone, kHelloBytes - in->helloDone, MSG_DONTWAIT);
    if (n == 0) {
      warnDrop(*in, "closed before completing its handshake", now);
      return false;
    }
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
        return true;
      }
      const std::string text = "socket error during the handshake: " + errnoText(err);
      warnDrop(*in, text.c_str(), now);
      return false;
    }
    in->helloDone += static_cast<size_t>(n);
    Refusal reason = Refusal::kNone;
    bool isOurs = true;
    if (!checkHelloPrefix(in->hello, in->helloDone, &reason, &isOurs)) {
      if (!isOurs) {
        warnDrop(*in, "sent data that is not a resilient TCP handshake", now);
        return false;
      }
      in->refusal = reason;
      in->state = Incoming::State::kAnswer;
      encodeAck(Ack{kProtocolVersion, reason, static_cast<uint32_t>(::getpid())}, in->ack);
    } else if (in->helloDone == kHelloBytes) {
      judge(in);
    } else {
      return true;
    }
    if (in->refusal != Refusal::kNone) {
      const std::string text =
          std::string("refused: ") + refusalName(in->refusal) +
          (in->helloDone == kHelloBytes ? " (host " + std::string(in->decoded.hostname) + " pid " +
                                              std::to_string(in->decoded.pid) + ")"
                                        : std::string());
      warnDrop(*in, text.c_str(), now);
    }
  }
  if (in->state == Incoming::State::kAnswer) {
    const ssize_t n = ::send(in->fd.get(), in->ack + in->ackDone, kAckBytes - in->ackDone,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
        return true;
      }
      if (in->refusal == Refusal::kNone) {
        const std::string text = "socket error during the handshake: " + errnoText(err);
        warnDrop(*in, text.c_str(), now);
      }
      return false;
    }
    in->ackDone += static_cast<size_t>(n);
    if (in->ackDone < kAckBytes) {
      return true;
    }
    if (in->refusal != Refusal::kNone) {
      return false;  // refused and told so: close
    }
    in->state = Incoming::State::kWaiting;
  }
  return true;
}

Status ListenComm::buildComm(uint64_t nonce, std::unique_ptr<RecvComm>* out) {
  const Hello first = [&] {
    for (const auto& in : incoming_) {
      if (in->decoded.nonce == nonce && in->decoded.socketIndex == 0) {
        return in->decoded;
      }
    }
    return Hello{};
  }();
  const int nSockets = first.nSockets;
  std::vector<FileDescriptor> sockets(static_cast<size_t>(nSockets));
  SocketAddress peerAddress;
  auto it = std::remove_if(incoming_.begin(), incoming_.end(), [&](std::unique_ptr<Incoming>& in) {
    if (in->state != Incoming::State::kWaiting || in->decoded.nonce != nonce) {
      return false;
    }
    if (in->decoded.socketIndex == 0) {
      peerAddress = in->peer;
    }
    sockets[in->decoded.socketIndex] = std::move(in->fd);
    return true;
  });
  incoming_.erase(it, incoming_.end());
  PeerInfo peer{peerAddress.toString(), first.hostname, first.pid};
  auto comm = std::make_unique<RecvComm>(std::move(sockets[0]), std::move(peer), first.chunkBytes);
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

Status ListenComm::accept(std::unique_ptr<RecvComm>* out) {
  out->reset();
  const uint64_t now = monotonicNs();
  acceptQueued(now);
  for (size_t i = 0; i < incoming_.size();) {
    if (advance(incoming_[i].get(), now)) {
      ++i;
    } else {
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  // Handshakes out of time: a socket alone, or a whole connection whose other
  // sockets did not all arrive.
  for (size_t i = 0; i < incoming_.size();) {
    Incoming& in = *incoming_[i];
    if (now < in.deadlineNs) {
      ++i;
      continue;
    }
    if (in.state != Incoming::State::kWaiting) {
      const std::string text =
          "no complete handshake within " + std::to_string(options_.handshakeTimeoutMs) + " ms";
      warnDrop(in, text.c_str(), now);
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const uint64_t nonce = in.decoded.nonce;
    size_t arrived = 0;
    for (const auto& other : incoming_) {
      arrived += other->state == Incoming::State::kWaiting && other->decoded.nonce == nonce;
    }
    const std::string text = "only " + std::to_string(arrived) + " of " +
                             std::to_string(in.decoded.nSockets) + " sockets arrived within " +
                             std::to_string(options_.handshakeTimeoutMs) + " ms (host " +
                             in.decoded.hostname + " pid " + std::to_string(in.decoded.pid) + ")";
    warnDrop(in, text.c_str(), now);
    auto it = std::remove_if(incoming_.begin(), incoming_.end(), [&](const auto& other) {
      return other->state != Incoming::State::kHello && other->decoded.nonce == nonce;
    });
    incoming_.erase(it, incoming_.end());
    i = 0;
  }
  // A connection whose sockets have all arrived becomes a comm.
  for (const auto& in : incoming_) {
    if (in->state != Incoming::State::kWaiting || in->decoded.socketIndex != 0) {
      continue;
    }
    const uint64_t nonce = in->decoded.nonce;
    size_t arrived = 0;
    for (const auto& other : incoming_) {
      arrived += other->state == Incoming::State::kWaiting && other->decoded.nonce == nonce;
    }
    if (arrived == in->decoded.nSockets) {
      return buildComm(nonce, out);
    }
  }
  return {};
}

}  // namespace resilient::transport::tcp
