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

PeerState::PeerState(const Policy& policy, bool opener, std::string addressText)
    : policy_(policy),
      opener_(opener),
      addressText_(std::move(addressText)),
      phase_(opener ? Phase::kConnecting : Phase::kUp) {}

Frame PeerState::openingHello() {
  openerNonce_ = auth::freshNonce();
  return makeHello(openerNonce_, policy_.selfPid, policy_.selfHost);
}

PeerState::Reaction PeerState::brokeHandshake(const char* unexpected) const {
  Reaction r;
  r.death = "peer " + addressText_ + " broke the handshake (an unexpected " + unexpected + ")";
  return r;
}

PeerState::Reaction PeerState::refuse(uint32_t pid, const std::string& host) const {
  Reaction r;
  r.reply = makeFrame(Type::kRefused);
  r.death = "peer " + addressText_ + " (pid " + std::to_string(pid) + ", host " +
            (host.empty() ? std::string("?") : host) +
            ") could not prove our job token (another job's process, or another "
            "NCCL_RESILIENT_JOB_TOKEN): refused";
  return r;
}

void PeerState::authenticate(uint32_t pid, const std::string& host) {
  host_ = host;
  pid_.store(pid, std::memory_order_relaxed);
  helloSeen_.store(true, std::memory_order_release);
}

PeerState::Reaction PeerState::onHello(const Frame& frame) {
  Reaction r;
  if (opener_ || helloReceived_) {
    return brokeHandshake("hello");
  }
  helloReceived_ = true;
  openerNonce_ = frame.nonce;
  acceptorNonce_ = auth::freshNonce();
  pendingPid_ = frame.pid;
  pendingHost_ = frame.host;
  const auth::Proof proof =
      auth::JobSecret(policy_.jobToken)
          .prove(kAuthProtocol, auth::Role::kListener, openerNonce_, acceptorNonce_,
                 authTranscript(frame.pid, frame.host, policy_.selfPid, policy_.selfHost));
  r.reply = makeChallenge(acceptorNonce_, policy_.selfPid, policy_.selfHost, proof);
  return r;
}

PeerState::Reaction PeerState::onChallenge(const Frame& frame) {
  if (!opener_ || authenticated()) {
    return brokeHandshake("challenge");
  }
  acceptorNonce_ = frame.nonce;
  const std::string transcript =
      authTranscript(policy_.selfPid, policy_.selfHost, frame.pid, frame.host);
  const auth::JobSecret secret(policy_.jobToken);
  if (!secret.verify(kAuthProtocol, auth::Role::kListener, openerNonce_, acceptorNonce_, transcript,
                     frame.proof.data())) {
    return refuse(frame.pid, frame.host);
  }
  authenticate(frame.pid, frame.host);
  Reaction r;
  r.reply = makeProof(secret.prove(kAuthProtocol, auth::Role::kConnector, openerNonce_,
                                   acceptorNonce_, transcript));
  return r;
}

PeerState::Reaction PeerState::onProof(const Frame& frame) {
  if (opener_ || !helloReceived_ || authenticated()) {
    return brokeHandshake("proof");
  }
  const std::string transcript =
      authTranscript(pendingPid_, pendingHost_, policy_.selfPid, policy_.selfHost);
  if (!auth::JobSecret(policy_.jobToken)
           .verify(kAuthProtocol, auth::Role::kConnector, openerNonce_, acceptorNonce_, transcript,
                   frame.proof.data())) {
    return refuse(pendingPid_, pendingHost_);
  }
  authenticate(pendingPid_, pendingHost_);
  return {};
}

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
  Reaction r;
  switch (frame.type) {
    case Type::kHello: return onHello(frame);
    case Type::kChallenge: lastHeardNs_ = now; return onChallenge(frame);
    case Type::kProof: return onProof(frame);
    case Type::kRefused:
      r.death = "peer " + addressText_ +
                " refused our proof of the job token (another job's process, or another "
                "NCCL_RESILIENT_JOB_TOKEN)";
      return r;
    default: break;
  }
  if (!authenticated()) {
    r.death = "peer " + addressText_ + " sent frame type " +
              std::to_string(static_cast<int>(frame.type)) + " before authenticating";
    return r;
  }
  lastHeardNs_ = now;
  switch (frame.type) {
    case Type::kBind: return r;
    case Type::kPing: r.reply = makeFrame(Type::kPong, frame.value); return r;
    case Type::kPong:
      lastPongSeq_ = std::max(lastPongSeq_, frame.value);
      if (frame.value == tickPingSeq_ && tickPingSeq_ != 0 && now >= lastPingNs_) {
        rttNs_ = now - lastPingNs_;
      }
      return r;
    case Type::kGoodbye:
      phase_ = Phase::kClosed;
      closedByPeer_ = true;
      if (frame.value != 0 && !peerReason_) {
        peerReason_ = RootCause{static_cast<FaultClass>(frame.value - 1), frame.pid, frame.host,
                                frame.detail};
      }
      return r;
    case Type::kFault:
      // About one communicator: no reason for the link's others (the
      // channel keeps it by communicator).
      return r;
    default: return r;
  }
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
    tickPingSeq_ = pingSeq_;
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
