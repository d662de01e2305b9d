// One link of the liveness channel: the TCP connection to one peer process
// (its socket, the decoder of what arrives, the bytes waiting to be written),
// the connections that use it, and that peer's liveness state machine
// (liveness/peer_state.h). A Connection points to the link of its peer
// process once the link is known (Connection::link).
//
// Also here: what concerns a connection through its link, without sockets:
// the peer's description for fault messages, the faults a link's state gives
// its connections, the busy mark of a tick.
//
// Threads: the liveness channel owns links and changes them with the
// watchdog's mutex held; so do failBusy(), deathOf() and markBusy(). The
// peer's identity (state.pid(), helloSeen(), host()) and describePeer() are
// read by any thread while the connection is open.
#pragma once

#include <map>
#include <set>
#include <string>

#include "common/net/socket_address.h"
#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/liveness/peer_state.h"
#include "plugin/net/liveness/wire.h"

namespace resilient::net::liveness {

struct PeerLink {
  enum class Origin { kOutgoing, kAccepted };

  // An outgoing link starts connecting; an accepted one is up.
  PeerLink(const Policy& policy, Origin origin, const SocketAddress& peerAddress);

  const bool outgoing;  // we connected (and say goodbye when done); else accepted
  const SocketAddress address;
  int fd = -1;
  Decoder decoder;
  std::string out;        // bytes waiting to be written
  std::string held;       // frames waiting for the handshake to end (PeerState::authenticated)
  uint64_t openedNs = 0;  // accepted: when (the handshake's deadline counts from it)
  int connections = 0;    // connections that use the link
  bool retired = false;   // closed and unused: freed by the channel at the end of its tick
  bool busy = false;      // a connection of it had requests outstanding at this tick
  PeerState state;
  // The fault notices the peer sent, by communicator: the peer's side of each
  // goes down, so a connection of it fails as soon as it is busy (deathOf),
  // not only if it was busy when the notice came.
  std::map<uint64_t, Frame> notices;
};

// "<peer endpoint> (host <h>, pid <p>)": who is at the other end of a
// connection, for fault messages (host "?" before the peer's hello; the
// peer's liveness address where the inner transport names no endpoint).
std::string describePeer(const ConnectionRecord& conn);

// Fails, through `sink`, every connection among `connections` that uses
// `link`, has requests outstanding and no fault yet (and, given `commId`,
// belongs to that communicator). Idle connections are left alone: they fail
// when they next turn busy (deathOf) or time out.
void failBusy(const std::set<ConnectionRecord*>& connections, const PeerLink& link,
              const Fault& fault, FaultSink& sink, std::optional<uint64_t> commId = std::nullopt);

// The fault of a busy connection whose link is dead ("peer process exited",
// the link's death reason), closed by its peer ("peer closed"), or whose
// communicator the peer sent a fault notice for ("peer closed"); nullopt
// while its link lives or it has none.
std::optional<Fault> deathOf(const ConnectionRecord& conn);

// Whether the connection's peer is known to answer heartbeats: its link is up.
bool answering(const ConnectionRecord& conn) noexcept;

// Marks the link of a busy connection busy for this tick's pings.
void markBusy(const ConnectionRecord& conn) noexcept;

// Data from the peer arrived on `conn` (its receive progressed) at `now`:
// evidence of life for the peer's link, as good as a heartbeat answer.
void heardFrom(const ConnectionRecord& conn, uint64_t now) noexcept;

}  // namespace resilient::net::liveness
