#include "plugin/net/liveness/stream_link.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/knobs.h"
#include "common/log.h"
#include "common/params.h"
#include "common/status.h"

namespace resilient::net::liveness {

Policy thisProcessPolicy() {
  const config::Params& params = config::Params::global();
  Policy policy;
  policy.timeoutMs = params.get<config::kLivenessTimeoutMs>();
  policy.jobToken = params.get<config::kJobToken>();
  policy.selfPid = static_cast<uint32_t>(::getpid());
  policy.selfHost = log::hostName();
  return policy;
}

StreamLink::StreamLink(const Policy& policy, bool opener, int fd, std::string peerText)
    : state_(policy, opener, std::move(peerText)),
      fd_(fd),
      pingIntervalNs_(policy.pingIntervalNs()) {
  if (fd_ >= 0) {
    const int flags = ::fcntl(fd_, F_GETFL);
    ::fcntl(fd_, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK);
  }
  if (opener) {
    (void)state_.connectFinished(0, 0);  // connected already: up
    send(state_.openingHello());
  }
}

StreamLink::~StreamLink() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void StreamLink::send(const Frame& frame) {
  if (fd_ < 0 || state_.phase() == PeerState::Phase::kDead) {
    return;
  }
  const bool handshake = frame.type == Type::kHello || frame.type == Type::kChallenge ||
                         frame.type == Type::kProof || frame.type == Type::kRefused;
  if (!handshake && !state_.authenticated()) {
    return;  // as the channel: nothing but the handshake before both sides proved the token
  }
  encode(frame, &out_);
  flush();
}

void StreamLink::flush() {
  while (!out_.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    }
    die("liveness link to " + state_.addressText() + ": send: " + errnoText(errno));
    return;
  }
}

void StreamLink::die(const std::string& reason) {
  state_.die(reason);
  out_.clear();
}

void StreamLink::onReadable(uint64_t now) {
  if (fd_ < 0 || state_.phase() == PeerState::Phase::kDead) {
    return;
  }
  int error = 0;
  std::string invalid;
  const ReadEnd end = readFrames(fd_, decoder_, &error, &invalid, [&](const Frame& frame) {
    const PeerState::Reaction reaction = state_.received(frame, now);
    if (reaction.reply) {
      send(*reaction.reply);
    }
    if (reaction.death) {
      die(*reaction.death);
      return false;
    }
    return true;
  });
  if (end == ReadEnd::kInvalid) {
    die("liveness link from " + state_.addressText() + " sent invalid data: " + invalid);
  } else if (end == ReadEnd::kEndOfStream) {
    if (const auto death = state_.endOfStream(error)) {
      die(*death);
    } else {
      state_.closed();  // orderly: goodbye, then EOF
    }
  }
}

std::optional<uint64_t> StreamLink::tick(uint64_t now) {
  lastTickNs_ = now;
  const PeerState::Tick t = state_.tick(now, /*busy=*/true);
  if (t.ping) {
    send(*t.ping);
  }
  return t.silentNs;
}

uint64_t StreamLink::nextTickNs(uint64_t now) const noexcept {
  return lastTickNs_ == 0 ? now : lastTickNs_ + pingIntervalNs_;
}

void StreamLink::goodbye() {
  if (open()) {
    send(makeGoodbye());
    state_.closed();
  }
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);
  }
}

}  // namespace resilient::net::liveness
