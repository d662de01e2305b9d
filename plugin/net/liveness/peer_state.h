// The liveness state machine of one peer process, as this process sees it
// through its link: the link's phase (connecting, up, closed by goodbye,
// dead), who the peer is (from its hello), when to ping it, when its silence
// becomes a fault and which one, and what a frame, an end of stream or a
// failed connect means. Pure: it owns no socket and reads no clock; every
// event carries `now` (monotonic ns) and every decision is returned, so a test
// drives it with a fake clock. The channel (liveness/channel.h) does what it
// returns: sends the frames, closes the link, fails the busy connections.
//
// The rules:
//  - pings go out only while a connection to the peer has requests
//    outstanding (a busy tick), every quarter of the liveness timeout;
//  - silence (no frame heard, or since the link turned busy if later) for
//    longer than the timeout while busy is "peer unresponsive", or "link down"
//    when the local interface of the link is down or without carrier;
//  - an end of stream after the peer's goodbye is an orderly close, without
//    it the peer process has exited: the link dies at once;
//  - the peer's goodbye closes the link for good: a connection with requests
//    outstanding to it (then or later) fails at once, "peer closed", naming
//    the fault the peer closed for, if it gave one (root cause) in its goodbye
//    or in the fault notice it sends when it detects a fault;
//  - nothing but the handshake counts before the link is authenticated: the
//    opener's hello (its nonce), the acceptor's challenge (its nonce and its
//    proof of the job token), the opener's proof (common/job_auth.h); a proof
//    that fails is refused, and a refusal, or any other frame before the
//    handshake is done, kills the link.
//
// Threads: driven by the liveness channel with the watchdog's mutex held (the
// watchdog thread, and the control path when it opens or closes a link). The
// peer's identity (pid(), helloSeen(), host()) is read by any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "common/net/interfaces.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/liveness/wire.h"

namespace resilient::net::liveness {

// The liveness settings every peer shares.
struct Policy {
  int64_t timeoutMs = 1000;  // NCCL_RESILIENT_LIVENESS_TIMEOUT_MS
  std::string jobToken;      // the key of the handshake's proofs (empty: the empty key)
  uint32_t selfPid = 0;      // who we say we are in the handshake
  std::string selfHost;

  uint64_t timeoutNs() const noexcept { return static_cast<uint64_t>(timeoutMs) * 1000000ull; }
  // A quarter of the timeout, at least 1 ms.
  uint64_t pingIntervalNs() const noexcept;
};

class PeerState {
 public:
  enum class Phase {
    kConnecting,  // outgoing, TCP connect in progress
    kUp,          // open (the handshake may still be under way: authenticated())
    kClosed,      // the peer said goodbye, or we closed it: no fault while idle
    kDead,        // broke without goodbye: the peer process is gone
  };

  // `opener`: we opened the link (and say hello first); `addressText`: the
  // peer's liveness address, for messages.
  PeerState(const Policy& policy, bool opener, std::string addressText);
  PeerState(const PeerState&) = delete;
  PeerState& operator=(const PeerState&) = delete;

  Phase phase() const noexcept { return phase_; }
  const std::string& addressText() const noexcept { return addressText_; }
  // Why the link died (kDead only).
  const std::string& deathReason() const noexcept { return deathReason_; }

  // Whether both sides proved the job token: until then only the handshake
  // travels.
  bool authenticated() const noexcept { return helloSeen(); }
  // The opener's first frame (its nonce, which this state keeps).
  Frame openingHello();
  // Acceptor: whether the opener's hello came (a stranger that sent nothing
  // is the first to go when too many are in their handshake).
  bool helloReceived() const noexcept { return helloReceived_; }

  // The peer process: its pid from the listen handle's trailer (outgoing) or
  // its hello; its host from its handshake (valid once helloSeen(), which
  // is once the link is authenticated).
  uint32_t pid() const noexcept { return pid_.load(std::memory_order_relaxed); }
  void setPid(uint32_t pid) noexcept { pid_.store(pid, std::memory_order_relaxed); }
  bool helloSeen() const noexcept { return helloSeen_.load(std::memory_order_acquire); }
  const std::string& host() const noexcept { return host_; }

  // --- Events. ---

  // The link opened: accepted, or its connect completed. Counts as hearing
  // from the peer.
  void opened(uint64_t now) noexcept;
  // Evidence of life other than a frame (data from the peer arrived at `now`):
  // the silence timer starts again.
  void heard(uint64_t now) noexcept { lastHeardNs_ = std::max(lastHeardNs_, now); }
  // The outgoing connect finished with `error` (SO_ERROR): 0 opens the link;
  // otherwise the reason it dies (nothing listens there: the process is gone).
  std::optional<std::string> connectFinished(int error, uint64_t now);

  // What a received frame asks for: first send `reply`, then the link dies
  // for `death`. Binds are the channel's business (nothing to do here).
  struct Reaction {
    std::optional<Frame> reply;        // a challenge, a proof, a pong; or "refused"
    std::optional<std::string> death;  // the link dies for this reason
  };
  Reaction received(const Frame& frame, uint64_t now);

  // The stream ended: recv returned 0 (`error` 0) or failed with errno
  // `error`. nullopt: after the peer's goodbye, an orderly close (no fault);
  // otherwise the reason the link dies (the peer process exited).
  std::optional<std::string> endOfStream(int error) const;

  // The link dies for `reason`; false if it was dead already. Every death
  // is "peer process exited" for the connections (deathFault()).
  bool die(std::string reason);
  // The link's socket is closed: by us (its last connection went), or at the
  // end of stream after the peer's goodbye. Closed, unless dead already.
  void closed() noexcept;
  // The fault a busy connection of a dead link gets, at once.
  Fault deathFault() const { return {FaultClass::kPeerExited, deathReason_, std::nullopt}; }
  // Whether the peer closed the link (its goodbye), and the fault a busy
  // connection of such a link gets, at once.
  bool closedByPeer() const noexcept { return closedByPeer_; }
  Fault closedFault() const;
  // The fault the peer's goodbye said it detected first, if any: the root
  // cause of what any connection to that process sees next. (A fault notice
  // is about one communicator: the channel keeps those by communicator,
  // PeerLink::notices.)
  const std::optional<RootCause>& peerReason() const noexcept { return peerReason_; }

  // --- The tick. ---

  struct Tick {
    std::optional<Frame> ping;         // send it now
    std::optional<uint64_t> silentNs;  // silent past the timeout, this long: see silenceFault()
  };
  // One watchdog tick. `busy`: a connection of the link has requests
  // outstanding. Only an open (or connecting) busy link pings and can be
  // silent; idle, it is disarmed: silence counts again from the next busy tick.
  Tick tick(uint64_t now, bool busy);
  // A ping sent outside the tick (a probe: does the peer answer now?), and
  // whether the answer to ping `seq` (or a later one) has come.
  Frame probe() { return makeFrame(Type::kPing, ++pingSeq_); }
  bool answered(uint64_t seq) const noexcept { return lastPongSeq_ >= seq; }
  // The last ping tick() sent has had no answer yet (false before the first):
  // asked before the next tick, the peer is a ping interval late.
  bool lastPingUnanswered() const noexcept {
    return tickPingSeq_ != 0 && !answered(tickPingSeq_);
  }
  // The round trip of the last answered tick ping (sent to answer read at
  // the watchdog's clock readings); 0 before the first.
  uint64_t rttNs() const noexcept { return rttNs_; }
  // What a silence of `silentNs` is. `local`: the state of the interface
  // that holds the link's local address (nullopt: unknown). A local interface
  // down or without carrier explains the silence: the link is cut, which says
  // nothing against the peer process.
  Fault silenceFault(uint64_t silentNs, const std::optional<net::LinkState>& local) const;

 private:
  // The handshake, by the frame that arrived.
  Reaction onHello(const Frame& frame);
  Reaction onChallenge(const Frame& frame);
  Reaction onProof(const Frame& frame);
  Reaction brokeHandshake(const char* unexpected) const;
  // A proof that failed: refused; the peer named as it said it is.
  Reaction refuse(uint32_t pid, const std::string& host) const;
  // Both proofs held: the peer's identity is known.
  void authenticate(uint32_t pid, const std::string& host);

  const Policy policy_;
  const bool opener_;
  const std::string addressText_;
  auth::Nonce openerNonce_{};
  auth::Nonce acceptorNonce_{};
  bool helloReceived_ = false;  // acceptor: the opener's hello came (its pid, host pending)
  uint32_t pendingPid_ = 0;
  std::string pendingHost_;
  Phase phase_;
  std::string deathReason_;
  bool closedByPeer_ = false;
  std::optional<RootCause> peerReason_;  // the fault the peer's goodbye named
  std::atomic<uint32_t> pid_{0};
  std::string host_;  // written once, before `helloSeen_` is released
  std::atomic<bool> helloSeen_{false};
  uint64_t lastHeardNs_ = 0;
  uint64_t armedSinceNs_ = 0;  // the first busy tick after idle; 0 while idle
  uint64_t lastPingNs_ = 0;
  uint64_t pingSeq_ = 0;
  uint64_t lastPongSeq_ = 0;
  uint64_t tickPingSeq_ = 0;  // the last ping tick() sent (sent at lastPingNs_)
  uint64_t rttNs_ = 0;
};

// The fault a busy connection of the communicator that a fault notice names
// gets, at once: the peer's side of that communicator goes down.
Fault noticeFault(const Frame& notice);

}  // namespace resilient::net::liveness
