#include "plugin/transport/tcp/connector.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "common/token_digest.h"
#include "plugin/transport/tcp/handle_address.h"

namespace resilient::transport::tcp {
namespace {

// Backoff of refused connections: 1 ms, doubling, at most 100 ms.
constexpr uint64_t kFirstBackoffNs = 1000000;
constexpr uint64_t kMaxBackoffNs = 100000000;

bool retryable(int err) noexcept {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN;
}

}  // namespace

struct Connector::Link {
  enum class State {
    kBackoff,     // waiting until retryAtNs to (re)try the TCP connect
    kConnecting,  // non-blocking connect in progress
    kHello,       // writing the hello
    kAck,         // reading the ack
    kReady,       // acknowledged
  };
  FileDescriptor fd;
  State state = State::kBackoff;
  uint64_t retryAtNs = 0;
  uint64_t backoffNs = kFirstBackoffNs;
  uint8_t hello[kHelloBytes] = {};
  size_t helloDone = 0;
  uint8_t ack[kAckBytes] = {};
  size_t ackDone = 0;
};

Connector::Connector(const ListenHandle& handle, const void* handleBytes, const TcpOptions& options,
                     const std::string& hostname, uint64_t nonce)
    : address_(toSocketAddress(handle)), peer_(address_.toString()), options_(options) {
  std::memcpy(handleBytes_, handleBytes, kHandleBytes);
  Hello hello;
  hello.tokenDigest = tokenDigest(options.jobToken);
  hello.nonce = nonce;
  hello.nSockets = static_cast<uint16_t>(options.nSocks + 1);
  hello.chunkBytes = options.chunkBytes;
  hello.pid = static_cast<uint32_t>(::getpid());
  const size_t n = std::min(hostname.size(), kHostnameBytes - 1);
  std::memcpy(hello.hostname, hostname.data(), n);
  for (int i = 0; i < options.nSocks + 1; ++i) {
    auto link = std::make_unique<Link>();
    hello.socketIndex = static_cast<uint16_t>(i);
    encodeHello(hello, link->hello);
    links_.push_back(std::move(link));
  }
}

Connector::~Connector() = default;

bool Connector::sameHandle(const void* handleBytes) const noexcept {
  return std::memcmp(handleBytes_, handleBytes, kHandleBytes) == 0;
}

void Connector::retryLater(Link* link, uint64_t now) {
  ++refusedCount_;
  link->fd.reset();
  link->state = Link::State::kBackoff;
  link->retryAtNs = now + link->backoffNs;
  link->backoffNs = std::min(link->backoffNs * 2, kMaxBackoffNs);
}

Status Connector::startConnect(Link* link, uint64_t now) {
  Result<FileDescriptor> fd = openStreamSocket(address_.family());
  if (!fd.ok()) {
    return fd.status();
  }
  link->fd = std::move(*fd);
  RESILIENT_TRY(applySocketOptions(link->fd.get(), socketOptions(options_)));
  const int err = resilient::startConnect(link->fd.get(), address_);
  if (err == 0) {
    link->state = Link::State::kHello;
    return {};
  }
  if (err == EINPROGRESS || err == EINTR) {
    link->state = Link::State::kConnecting;
    return {};
  }
  if (retryable(err)) {
    retryLater(link, now);
    return {};
  }
  return connectionError(err, "connect", peer_);
}

Status Connector::refusalError(const Ack& ack) const {
  std::string text = "connection refused by the listener: ";
  text += refusalName(ack.refusal);
  switch (ack.refusal) {
    case Refusal::kBadToken:
      text += " (both sides must be given the same job token)";
      return Status::error(ErrorKind::kInvalidUsage, text, 0, peer_);
    case Refusal::kBadVersion:
      text += " (listener speaks version " + std::to_string(ack.version) + ", this side " +
              std::to_string(kProtocolVersion) + ")";
      return Status::error(ErrorKind::kInvalidUsage, text, 0, peer_);
    default: return remoteError(text, peer_);
  }
}

Status Connector::advance(Link* link, uint64_t now) {
  switch (link->state) {
    case Link::State::kBackoff:
      if (now < link->retryAtNs) {
        return {};
      }
      RESILIENT_TRY(startConnect(link, now));
      if (link->state != Link::State::kHello) {
        return {};
      }
      break;
    case Link::State::kConnecting: {
      const Result<bool> writable = waitReady(link->fd.get(), POLLOUT, 0);
      if (writable.ok() && !*writable) {
        return {};
      }
      const int err =
          writable.ok() ? pendingSocketError(link->fd.get()) : writable.status().sysErrno();
      if (err == 0) {
        link->state = Link::State::kHello;
        break;
      }
      if (retryable(err)) {
        retryLater(link, now);
        return {};
      }
      return connectionError(err, "connect", peer_);
    }
    default: break;
  }
  if (link->state == Link::State::kHello) {
    const ssize_t n = ::send(link->fd.get(), link->hello + link->helloDone,
                             kHelloBytes - link->helloDone, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
        return {};
      }
      return connectionError(err, "the handshake", peer_);
    }
    link->helloDone += static_cast<size_t>(n);
    if (link->helloDone < kHelloBytes) {
      return {};
    }
    link->state = Link::State::kAck;
  }
  if (link->state == Link::State::kAck) {
    const ssize_t n =
        ::recv(link->fd.get(), link->ack + link->ackDone, kAckBytes - link->ackDone, MSG_DONTWAIT);
    if (n == 0) {
      return remoteError("the listener closed the connection during the handshake", peer_);
    }
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
        return {};
      }
      return connectionError(err, "the handshake", peer_);
    }
    link->ackDone += static_cast<size_t>(n);
    if (link->ackDone < kAckBytes) {
      return {};
    }
    Ack ack;
    if (!decodeAck(link->ack, &ack)) {
      return remoteError("the listener answered the handshake with something that is not an ack",
                         peer_);
    }
    if (ack.refusal != Refusal::kNone) {
      return refusalError(ack);
    }
    link->state = Link::State::kReady;
  }
  return {};
}

Status Connector::poll(std::unique_ptr<SendComm>* out) {
  out->reset();
  const uint64_t now = monotonicNs();
  if (startNs_ == 0) {
    startNs_ = now;
    deadlineNs_ = now + static_cast<uint64_t>(options_.connectTimeoutMs) * 1000000ull;
  }
  bool ready = true;
  for (auto& link : links_) {
    RESILIENT_TRY(advance(link.get(), now));
    ready = ready && link->state == Link::State::kReady;
  }
  if (!ready) {
    if (now < deadlineNs_) {
      return {};
    }
    const bool anyConnected = std::any_of(links_.begin(), links_.end(), [](const auto& l) {
      return l->state == Link::State::kHello || l->state == Link::State::kAck ||
             l->state == Link::State::kReady;
    });
    std::string text = "could not connect within " + std::to_string(options_.connectTimeoutMs) +
                       " ms (connect timeout): ";
    if (anyConnected) {
      text += "the listener did not answer the handshake (is its accept() being called?)";
    } else if (refusedCount_ > 0) {
      text += "connection refused " + std::to_string(refusedCount_) + " times (nobody listening)";
    } else {
      text += "no TCP connection established";
    }
    return timeoutError(text, peer_);
  }
  PeerInfo peer{peer_, {}, 0};
  auto comm = std::make_unique<SendComm>(std::move(links_[0]->fd), std::move(peer),
                                         options_.inlineBytes, options_.chunkBytes);
  std::vector<FileDescriptor> data;
  for (size_t i = 1; i < links_.size(); ++i) {
    data.push_back(std::move(links_[i]->fd));
  }
  RESILIENT_TRY(comm->start(std::move(data), options_.nThreads));
  RES_INFO(NCCL_NET | NCCL_INIT,
           "tcp: connected to %s from %s in %.1f ms: %d data sockets, %d helper threads, "
           "chunk %u bytes, inline up to %zu bytes",
           peer_.c_str(), comm->localEndpoint().text, static_cast<double>(now - startNs_) / 1e6,
           comm->dataSockets(), std::min(options_.nThreads, comm->dataSockets()),
           comm->chunkBytes(), options_.inlineBytes);
  *out = std::move(comm);
  return {};
}

}  // namespace resilient::transport::tcp
