// The liveness channel of this process: one TCP listener, advertised in the
// trailer of every listen handle (plugin/net/handle_trailer.h), and one link
// per peer process (liveness/peer_link.h), over which the net plugins of the
// two processes exchange the frames of liveness/wire.h: the handshake (hello,
// challenge, proof: each side proves the job token, common/job_auth.h), bind
// ("my connection to your listen comm N uses this link"), ping/pong while
// requests to the peer are outstanding, fault notices, goodbye. An accepted
// link that does not complete its handshake in time, or is the oldest of too
// many in theirs, is dropped: strangers hold nothing.
//
// The channel does the sockets (non-blocking, watched by the watchdog
// thread's event loop) and the bookkeeping of links, listen nonces and
// binds. What an event means -- when to ping, when silence is a fault and
// which, goodbye versus end of stream -- each peer's state machine decides
// (liveness/peer_state.h); the channel fails the busy connections of the link
// through the FaultSink.
//
// Threads: not synchronised by itself. Every call is made with the watchdog's
// mutex held: the control path (NCCL's threads, through Core and Watchdog:
// listen, connect, accept, close) and the watchdog thread (onEvent, tick).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/net/event_loop.h"
#include "common/net/socket_address.h"
#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/handle_trailer.h"
#include "plugin/net/liveness/peer_link.h"
#include "plugin/net/liveness/peer_state.h"
#include "plugin/net/liveness/wire.h"

namespace resilient::net::liveness {

struct ChannelOptions {
  Policy policy;              // its selfPid and selfHost: who we say we are
  SocketAddress bindAddress;  // empty (length 0): no liveness channel
};

class Channel {
 public:
  // `connections`: the watchdog's registry (the connections a link's fault
  // can reach); `sink` receives the faults. Both outlive the channel.
  Channel(ChannelOptions options, const std::set<ConnectionRecord*>& connections, FaultSink& sink);
  ~Channel();  // closes every socket (the watchdog thread has stopped)
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // The event loop that watches the channel's sockets (the watchdog
  // thread's). Set once, before any call that opens a socket.
  void setEventLoop(EventLoop* events) noexcept { events_ = events; }

  // --- Control path. ---

  // Keys that a peer binds to: one per listen comm, and one per connection
  // introduced in band (plugin/net/introduction.h); the trailer that
  // advertises one.
  uint64_t newListenNonce();
  uint64_t newConnectionKey() { return nextNonce_++; }
  // Opens the listener on first use. False when there is no liveness channel
  // (no usable address).
  bool trailerFor(uint64_t key, HandleTrailer* out);
  void forgetListenNonce(uint64_t nonce);

  // Connection setup: ties a connection to the link of its peer process. The
  // side that holds the peer's trailer (the connector, from the handle; the
  // acceptor of an introduced connection, from its first message) opens (or
  // reuses) the link and binds the trailer's key; the other side waits for
  // that bind.
  void linkTo(ConnectionRecord& conn, const HandleTrailer& trailer);
  void awaitLink(ConnectionRecord& conn, uint64_t key);
  // A connection closes: its link loses it; an outgoing link that loses its
  // last connection says goodbye and closes. Once a fault was announced
  // (announce), incoming links that lose their last connection say goodbye
  // (naming it) and close too.
  void detach(ConnectionRecord& conn);
  // The process's plugin is going away: goodbye on every link that is up.
  void sayGoodbyeToAll();
  // This process found a fault whose root cause is `root` in communicator
  // `commId`: the first of each communicator is announced on every link that
  // is up and authenticated, and on every other link once its handshake is
  // done (a fault notice), whose receivers fail at once their busy
  // connections of that communicator to us; later goodbyes name the first
  // fault of all, so that peers downstream report the root cause, not us.
  void announce(const RootCause& root, uint64_t commId);
  // What the peer of `conn` said it detected, in the connection's
  // communicator (its notice) or in any (its goodbye), after reading what its
  // link holds now (a data connection may report the peer's close before the
  // watchdog thread has read the peer's notice; an accepted connection may
  // not know its link yet, whose bind then waits unread: every link is read).
  std::optional<RootCause> peerReasonOf(const ConnectionRecord& conn, uint64_t now);
  // Asks the peer of `conn` for a heartbeat now and reads its link until the
  // answer comes (true), the link dies or closes, or `timeoutNs` passes
  // (false). For an error whose cause is in doubt: a dying peer's kernel may
  // reset one socket before it closes the link.
  bool probe(const ConnectionRecord& conn, uint64_t timeoutNs);

  // --- Watchdog thread. ---

  // An event of the watchdog's event loop: the listener or a link is ready.
  // `now` is the watchdog's clock.
  void onEvent(void* tag, uint32_t events, uint64_t now);
  // After the watchdog has marked the busy links (markBusy): pings, silence
  // faults; then frees the retired links.
  void tick(uint64_t now);

 private:
  bool ensureListener();
  void handleListener(uint64_t now);
  void handleLink(PeerLink* link, uint32_t events, uint64_t now);
  void onFrame(PeerLink* link, const Frame& frame, uint64_t now);
  void bind(PeerLink* link, uint64_t nonce);
  void startConnect(PeerLink* link);
  void send(PeerLink* link, const Frame& frame);
  void flush(PeerLink* link);
  void markDead(PeerLink* link, const std::string& reason);
  void closeLink(PeerLink* link);
  void reap();
  // Accepted links whose peer has not proved the job token yet.
  std::vector<PeerLink*> inHandshake() const;
  void makeRoomForHandshake(uint64_t now);
  void dropUnauthenticated(PeerLink* link, const char* why, uint64_t now);
  void updateInterest(PeerLink* link);
  // Our goodbye: plain, or naming the fault we close for.
  Frame goodbye() const;

  const ChannelOptions options_;
  const std::set<ConnectionRecord*>& connections_;
  FaultSink& sink_;
  EventLoop* events_ = nullptr;
  log::RateLimiter warnLimiter_;  // WARNs about strangers
  int listenFd_ = -1;
  SocketAddress listenAddress_;
  uint64_t nextNonce_ = 1;
  std::set<uint64_t> listenNonces_;
  std::map<uint64_t, PeerLink*> boundNonces_;  // listen nonce -> link that bound it
  std::map<uint64_t, std::vector<ConnectionRecord*>> awaitingBind_;
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::optional<RootCause> closingFor_;  // the first fault announced
  std::set<uint64_t> announcedComms_;    // the communicators a notice went out for
  std::vector<Frame> notices_;           // every notice announced (for links made later)
};

}  // namespace resilient::net::liveness
