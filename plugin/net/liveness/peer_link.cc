#include "plugin/net/liveness/peer_link.h"

namespace resilient::net::liveness {

PeerLink::PeerLink(const Policy& policy, Origin origin, const SocketAddress& peerAddress)
    : outgoing(origin == Origin::kOutgoing),
      address(peerAddress),
      state(policy, outgoing, peerAddress.toString()) {}

std::string describePeer(const ConnectionRecord& conn) {
  const PeerLink* link = conn.link.load(std::memory_order_acquire);
  std::string s = conn.identity.peer.text[0] != '\0' ? conn.identity.peer.text : "?";
  if (s == "?" && link != nullptr) {
    // The inner transport names no endpoint: the peer's liveness address
    // says which host (and interface) it is on.
    s = "liveness " + link->state.addressText();
  }
  if (link != nullptr) {
    const bool hello = link->state.helloSeen();
    s += " (host " + (hello ? link->state.host() : std::string("?")) + ", pid " +
         std::to_string(link->state.pid()) + ")";
  }
  return s;
}

void failBusy(const std::set<ConnectionRecord*>& connections, const PeerLink& link,
              const Fault& fault, FaultSink& sink, std::optional<uint64_t> commId) {
  for (ConnectionRecord* conn : connections) {
    if (conn->link.load(std::memory_order_relaxed) == &link && conn->outstanding() > 0 &&
        conn->fault() == nullptr && (!commId || conn->commId() == *commId)) {
      sink.report(*conn, fault);
    }
  }
}

std::optional<Fault> deathOf(const ConnectionRecord& conn) {
  const PeerLink* link = conn.link.load(std::memory_order_relaxed);
  if (link != nullptr && link->state.phase() == PeerState::Phase::kDead) {
    return link->state.deathFault();
  }
  if (link != nullptr && link->state.closedByPeer()) {
    return link->state.closedFault();
  }
  if (link != nullptr) {
    if (const auto notice = link->notices.find(conn.commId()); notice != link->notices.end()) {
      return noticeFault(notice->second);
    }
  }
  return std::nullopt;
}

bool answering(const ConnectionRecord& conn) noexcept {
  const PeerLink* link = conn.link.load(std::memory_order_relaxed);
  return link != nullptr && link->state.phase() == PeerState::Phase::kUp;
}

void heardFrom(const ConnectionRecord& conn, uint64_t now) noexcept {
  if (PeerLink* link = conn.link.load(std::memory_order_relaxed)) {
    link->state.heard(now);
  }
}

void markBusy(const ConnectionRecord& conn) noexcept {
  if (PeerLink* link = conn.link.load(std::memory_order_relaxed)) {
    link->busy = true;
  }
}

}  // namespace resilient::net::liveness
