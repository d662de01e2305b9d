#include "plugin/net/liveness/peer_state.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "common/status.h"

namespace resilient::net::liveness {

namespace {
constexpr uint64_t kMs = 1000000;
}  // namespace

uint64_t Policy::pingIntervalNs() const noexcept {
  return std::max<uint64_t>(timeoutNs() / 4, kMs);
}

PeerState::PeerState(const Policy& policy, Phase initial, std::string addressText)
    : policy_(policy), addressText_(std::move(addressText)), phase_(initial) {}

void PeerState::opened(uint64_t now) noexcept {
  phase_ = Phase::kUp;
  lastHeardNs_ = std::max(lastHeardNs_, now);
}

std::optional<std::string> PeerState::connectFinished(int error, uint64_t now) {
  if (error != 0) {
    return "liveness channel to " + addressText_ + ": connect: " + errnoText(error) +
           " (the peer process is gone)";
  }
  opened(now);
  return std::nullopt;
}

PeerState::Reaction PeerState::received(const Frame& frame, uint64_t now) {
  lastHeardNs_ = now;
  Reaction r;
  switch (frame.type) {
    case Type::kHello:
      if (policy_.tokenDigest != 0 && frame.value != policy_.tokenDigest) {
        r.reply = makeFrame(Type::kRefused);
        r.death = "peer " + addressText_ + " presented another job token";
        return r;
      }
      if (!helloSeen_.load(std::memory_order_relaxed)) {
        host_ = frame.host;
        pid_.store(frame.pid, std::memory_order_relaxed);
        helloSeen_.store(true, std::memory_order_release);
      }
      return r;
    case Type::kBind: return r;
    case Type::kPing: r.reply = makeFrame(Type::kPong, frame.value); return r;
    case Type::kPong: return r;
    case Type::kGoodbye:
      phase_ = Phase::kClosed;
      closedByPeer_ = true;
      [[fallthrough]];
    case Type::kFault:
      if (frame.value != 0 && !peerReason_) {
        peerReason_ = RootCause{static_cast<FaultClass>(frame.value - 1), frame.pid, frame.host,
                                frame.detail};
      }
      return r;
    case Type::kRefused: r.death = "peer " + addressText_ + " refused our job token"; return r;
  }
  return r;
}

std::optional<std::string> PeerState::endOfStream(int error) const {
  if (phase_ == Phase::kClosed) {
    return std::nullopt;  // orderly: goodbye, then EOF
  }
  return error == 0
             ? "the peer process closed its liveness channel without goodbye (process exited)"
             : "liveness channel: " + errnoText(error);
}

Fault PeerState::closedFault() const {
  if (!peerReason_) {
    return {FaultClass::kPeerClosed,
            "the peer process closed its side (goodbye) with requests to it outstanding",
            std::nullopt};
  }
  return {FaultClass::kPeerClosed,
          "the peer process closed its side after detecting " + describe(*peerReason_),
          peerReason_};
}

Fault noticeFault(const Frame& notice) {
  const RootCause root{static_cast<FaultClass>(notice.value - 1), notice.pid, notice.host,
                       notice.detail};
  char comm[32];
  std::snprintf(comm, sizeof comm, "%#llx", static_cast<unsigned long long>(notice.commId));
  return {FaultClass::kPeerClosed,
          "the peer process detected " + describe(root) + " in communicator " + comm +
              ", whose side there goes down",
          root};
}

bool PeerState::die(std::string reason) {
  if (phase_ == Phase::kDead) {
    return false;
  }
  phase_ = Phase::kDead;
  deathReason_ = std::move(reason);
  return true;
}

void PeerState::closed() noexcept {
  if (phase_ != Phase::kDead) {
    phase_ = Phase::kClosed;
  }
}

PeerState::Tick PeerState::tick(uint64_t now, bool busy) {
  Tick t;
  if (!busy || (phase_ != Phase::kUp && phase_ != Phase::kConnecting)) {
    armedSinceNs_ = 0;
    return t;
  }
  if (armedSinceNs_ == 0) {
    armedSinceNs_ = now;
  }
  if (now >= lastPingNs_ + policy_.pingIntervalNs()) {
    lastPingNs_ = now;
    t.ping = makeFrame(Type::kPing, ++pingSeq_);
  }
  const uint64_t since = std::max(lastHeardNs_, armedSinceNs_);
  if (now > since + policy_.timeoutNs()) {
    t.silentNs = now - since;
  }
  return t;
}

Fault PeerState::silenceFault(uint64_t silentNs, const std::optional<net::LinkState>& local) const {
  const double silentMs = static_cast<double>(silentNs) / 1e6;
  const auto threshold = static_cast<long long>(policy_.timeoutMs);
  char detail[256];
  if (local && (!local->up || !local->carrier)) {
    snprintf(detail, sizeof detail,
             "no answer to heartbeats and no data for %.0f ms (threshold %lld ms) and the local "
             "interface %s is %s: the link to the peer is cut",
             silentMs, threshold, local->name.c_str(), !local->up ? "down" : "without carrier");
    return {FaultClass::kLinkDown, detail};
  }
  snprintf(detail, sizeof detail,
           "no answer to heartbeats and no data from it for %.0f ms (threshold %lld ms): the "
           "peer process or its host is gone, frozen or unreachable",
           silentMs, threshold);
  return {FaultClass::kPeerUnresponsive, detail};
}

}  // namespace resilient::net::liveness
