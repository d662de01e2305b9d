#include "plugin/transport/tcp/connector.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/handshake_io.h"

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
    kChallenge,   // reading the listener's challenge
    kResponse,    // writing the response (the proof of the job token)
    kAck,         // reading the ack
    kReady,       // acknowledged
  };
  FileDescriptor fd;
  State state = State::kBackoff;
  uint64_t retryAtNs = 0;
  uint64_t backoffNs = kFirstBackoffNs;
  uint8_t hello[kHelloBytes] = {};
  size_t helloDone = 0;
  uint8_t challenge[kChallengeBytes] = {};
  size_t challengeDone = 0;
  uint8_t response[kResponseBytes] = {};
  size_t responseDone = 0;
  uint8_t ack[kAckBytes] = {};
  size_t ackDone = 0;
};

Connector::Connector(const ListenHandle& handle, const std::byte* handleBytes,
                     const TcpOptions& options, const std::string& hostname, uint64_t nonce)
    : address_(toSocketAddress(handle)),
      peer_(address_.toString()),
      options_(options),
      secret_(options.jobToken) {
  std::memcpy(handleBytes_, handleBytes, kHandleBytes);
  Hello hello;
  hello.nonce = nonce;
  hello.nSockets = static_cast<uint16_t>(options.nSocks + 1);
  hello.chunkBytes = options.chunkBytes;
  hello.pid = static_cast<uint32_t>(::getpid());
  const size_t n = std::min(hostname.size(), kHostnameBytes - 1);
  std::memcpy(hello.hostname, hostname.data(), n);
  for (int i = 0; i < options.nSocks + 1; ++i) {
    auto link = std::make_unique<Link>();
    hello.socketIndex = static_cast<uint16_t>(i);
    // A hello is sent once (a retry reconnects before sending it), so each
    // socket's nonce is fresh.
    hello.authNonce = auth::freshNonce();
    encodeHello(hello, link->hello);
    links_.push_back(std::move(link));
  }
}

Connector::~Connector() = default;

bool Connector::sameHandle(const std::byte* handleBytes) const noexcept {
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

Status Connector::refusalError(Refusal refusal, uint16_t listenerVersion) const {
  std::string text = "connection refused by the listener: ";
  if (listenerVersion != kProtocolVersion || refusal == Refusal::kBadVersion) {
    text += std::string(refusalName(Refusal::kBadVersion)) + " (listener speaks version " +
            std::to_string(listenerVersion) + ", this side " + std::to_string(kProtocolVersion) +
            ")";
    return Status::error(ErrorKind::kInvalidUsage, text, 0, peer_);
  }
  text += refusalName(refusal);
  return remoteError(text, peer_);
}

Status Connector::ioError(IoStep step, int err) const {
  if (step == IoStep::kClosed) {
    return remoteError("the listener closed the connection during the handshake", peer_);
  }
  return connectionError(err, "the handshake", peer_);
}

Status Connector::tokenMismatch(const std::string& what) const {
  const std::string text = "job token mismatch: the listener at " + peer_ + " (pid " +
                           std::to_string(listenerPid_) + ") " + what +
                           " (both sides must be given the same NCCL_RESILIENT_JOB_TOKEN)";
  RES_WARN(NCCL_NET | NCCL_INIT, "tcp: %s", text.c_str());
  return Status::error(ErrorKind::kInvalidUsage, text, 0, peer_);
}

Status Connector::readChallenge(Link* link) {
  int err = 0;
  const IoStep step =
      receiveStep(link->fd.get(), link->challenge, kChallengeBytes, &link->challengeDone, &err);
  // The header (magic, version, code, pid) keeps its offsets in every
  // version: a refusal, or a listener of another version, is told as soon as
  // it arrives, even when the listener closes right after.
  if (link->challengeDone >= kChallengeHeaderBytes) {
    Challenge header;
    if (!decodeChallengeHeader(link->challenge, &header)) {
      return remoteError("the listener answered the hello with something that is not a challenge",
                         peer_);
    }
    listenerPid_ = header.pid;
    if (header.refusal != Refusal::kNone || header.version != kProtocolVersion) {
      return refusalError(header.refusal, header.version);
    }
  }
  if (step == IoStep::kPending) {
    return {};
  }
  if (step != IoStep::kComplete) {
    return ioError(step, err);
  }
  if (!secret_.listenerProofHolds(link->hello, link->challenge)) {
    // Told so, best effort (a fresh socket's buffer has room for it), so that
    // the listener logs the mismatch too.
    encodeResponse(Response{Verdict::kNotProven, {}}, link->response);
    (void)sendStep(link->fd.get(), link->response, kResponseBytes, &link->responseDone, &err);
    return tokenMismatch("could not prove the job token");
  }
  encodeResponse(Response{Verdict::kProven, secret_.connectorProof(link->hello, link->challenge)},
                 link->response);
  link->state = Link::State::kResponse;
  return {};
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
  int err = 0;
  if (link->state == Link::State::kHello) {
    const IoStep step = sendStep(link->fd.get(), link->hello, kHelloBytes, &link->helloDone, &err);
    if (step == IoStep::kPending) {
      return {};
    }
    if (step != IoStep::kComplete) {
      return connectionError(err, "the handshake", peer_);
    }
    link->state = Link::State::kChallenge;
  }
  if (link->state == Link::State::kChallenge) {
    RESILIENT_TRY(readChallenge(link));
  }
  if (link->state == Link::State::kResponse) {
    const IoStep step =
        sendStep(link->fd.get(), link->response, kResponseBytes, &link->responseDone, &err);
    if (step == IoStep::kPending) {
      return {};
    }
    if (step != IoStep::kComplete) {
      return connectionError(err, "the handshake", peer_);
    }
    link->state = Link::State::kAck;
  }
  if (link->state == Link::State::kAck) {
    const IoStep step = receiveStep(link->fd.get(), link->ack, kAckBytes, &link->ackDone, &err);
    if (step == IoStep::kPending) {
      return {};
    }
    if (step != IoStep::kComplete) {
      return ioError(step, err);
    }
    Ack ack;
    if (!decodeAck(link->ack, &ack)) {
      return remoteError("the listener answered the handshake with something that is not an ack",
                         peer_);
    }
    if (ack.refusal == Refusal::kBadToken) {
      return tokenMismatch("could not verify this process's proof of the job token");
    }
    if (ack.refusal != Refusal::kNone) {
      return refusalError(ack.refusal, kProtocolVersion);
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
      return l->state != Link::State::kBackoff && l->state != Link::State::kConnecting;
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
  PeerInfo peer{peer_, {}, listenerPid_};
  auto comm = std::make_unique<TcpSendComm>(std::move(links_[0]->fd), std::move(peer),
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
