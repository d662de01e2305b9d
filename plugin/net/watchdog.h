// The net plugin's one background thread per process, and the registry of
// the connections it watches. It sleeps in its event loop
// (common/net/event_loop.h) on the liveness channel's sockets, and at every tick (a twentieth of
// the liveness timeout, 5 to 50 ms) reads its clock once and
//  - serves the socket events of the liveness channel (liveness/channel.h);
//  - looks at every connection with requests outstanding: the progress
//    monitor stamps its progress (progress_monitor.h); a connection whose
//    liveness link is dead fails at once ("peer process exited"); the
//    progress monitor fails it if stuck; otherwise its link is marked busy;
//  - lets the channel ping the busy links' peers and judge their silence;
//  - rewrites the connection table of the blackbox (blackbox_table.h).
// Faults go to a FaultSink (the Core); the thread includes nothing of core.h.
//
// Threads: the thread starts with the first connection or listen handle and
// stops when the watchdog is destroyed (before the transport and the
// blackbox). One mutex serialises it with the control-path calls below, which
// come from NCCL's init and proxy service threads through Core; the data
// path never calls here.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "blackbox/writer.h"
#include "common/clock.h"
#include "common/net/event_loop.h"
#include "common/net/socket_address.h"
#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/handle_trailer.h"
#include "plugin/net/liveness/channel.h"
#include "plugin/net/progress_monitor.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

struct WatchdogOptions {
  int64_t livenessTimeoutMs = 1000;
  int64_t progressTimeoutMs = 300000;  // 0: off
  std::string jobToken;                // the key of the liveness handshake's proofs
  SocketAddress bindAddress;           // empty (length 0): no liveness channel
  std::string hostName;
};

class Watchdog {
 public:
  // `sink`: where faults go; `blackbox` (may be null) receives a snapshot of
  // every connection each tick (progress read from each connection's inner
  // comm, Comm::bytesMoved); `clock`: the time of the ticks. All outlive it.
  Watchdog(FaultSink& sink, const WatchdogOptions& options, blackbox::Writer* blackbox,
           const Clock& clock);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Keys: one per listen comm and per connection introduced in band.
  uint64_t newListenNonce();
  uint64_t newConnectionKey();
  // False when there is no liveness channel (no usable address).
  bool trailerFor(uint64_t key, HandleTrailer* out);
  void forgetListenNonce(uint64_t nonce);

  // Connection setup: tie a connection to the link of its peer process
  // (liveness::Channel::linkTo, awaitLink).
  void linkTo(ConnectionRecord& conn, const HandleTrailer& trailer);
  void awaitLink(ConnectionRecord& conn, uint64_t key);
  // Watch a connection / stop watching it (before it is deleted).
  void add(ConnectionRecord* conn);
  void remove(ConnectionRecord* conn);

  // Root causes (liveness::Channel::announce, peerReasonOf). announceLocked
  // is for the FaultSink's callers, which hold the mutex already.
  void announce(const RootCause& root, uint64_t commId);
  void announceLocked(const RootCause& root, uint64_t commId);

  // What the liveness channel knows of the peer of `conn`, after reading
  // what its link holds now (a data connection may fail before the watchdog
  // thread has read the peer's last frames).
  struct PeerNews {
    // Its link is dead, closed by it, or it sent a fault notice for the
    // connection's communicator: the fault that is (liveness::deathOf).
    std::optional<Fault> death;
    // The fault it said it detected (its notice or goodbye), if any.
    std::optional<RootCause> reason;
    // It answers heartbeats (its link is up): a local error of the inner
    // transport is then our own.
    bool answering = false;
  };
  // `confirm`: a peer that seems to answer is asked for a heartbeat first
  // (liveness::Channel::probe): `answering` is then the answer, and a death
  // the probe reads is in `death`.
  PeerNews peerNews(const ConnectionRecord& conn, bool confirm = false);

 private:
  void ensureThreadLocked();
  void run(const std::stop_token& stop);
  void wake() noexcept;
  void tick(uint64_t now);
  // A CollNet comm has no peer of its own: its collectives wait on every rank
  // of its communicator. Once another connection of that communicator has
  // failed, or its peer is known dead, a collective outstanding on the
  // CollNet comm cannot complete: the comm fails with that fault as its root
  // cause, at this tick, instead of at the progress timeout. Communicators
  // of the versions without contexts all read as id 0 and are left alone.
  void failCollectivesOfFailedComms();
  // The connection's busy time (ConnectionRecord::busyNs): the interval
  // since the previous tick counts when the link is busy now: for a send
  // link, backlogged in the inner transport when it can tell
  // (Transport::linkBacklogged), else with requests outstanding.
  void sampleBusy(ConnectionRecord& conn, uint64_t now) noexcept;

  FaultSink& sink_;
  const int64_t livenessTimeoutMs_;
  blackbox::Writer* const blackbox_;
  const Clock& clock_;

  std::mutex mutex_;  // guards everything below but ready_
  // Made with the thread (nothing at load time); wake() may run before.
  std::optional<EventLoop> events_;
  std::vector<std::pair<void*, uint32_t>> ready_;  // the watchdog thread's, reused
  std::set<ConnectionRecord*> connections_;
  ProgressMonitor progress_;
  liveness::Channel channel_;  // after connections_, which it reads
  std::jthread thread_;
};

}  // namespace resilient::net
