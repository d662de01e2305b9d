// The liveness mechanism on one connected stream socket whose owner polls it
// itself: the frames of liveness/wire.h, the handshake and the silence rules
// of the peer's state machine (liveness/peer_state.h), exactly as a link of
// the net plugin's liveness channel (liveness/channel.h), without the
// channel's listener, binds and connections. The restart library uses it
// between a rank and its monitor process (restart/loop/monitoring/rank_liveness.h, the
// rank's end, which answers; restart/monitor/monitor.h, the monitor's end,
// which pings and judges the silence): so a rank that no NCCL byte reaches
// through the net plugin (one node over NVLink, gloo, a path around the
// plugin) is judged by the same rules and named in the same words as a peer
// of the net plugin.
//
// Threads: one owner thread at a time; not synchronised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "plugin/net/fault_sink.h"
#include "plugin/net/liveness/peer_state.h"
#include "plugin/net/liveness/wire.h"

namespace resilient::net::liveness {

// The liveness settings of this process's end of a stream link: the knobs
// (NCCL_RESILIENT_LIVENESS_TIMEOUT_MS, NCCL_RESILIENT_JOB_TOKEN; environment
// or nccl.conf), its pid and host name.
Policy thisProcessPolicy();

class StreamLink {
 public:
  // `fd`: a connected stream socket (owned: closed by the destructor), made
  // non-blocking here. `opener`: this end says hello and pings; the other
  // end answers.
  StreamLink(const Policy& policy, bool opener, int fd, std::string peerText);
  ~StreamLink();
  StreamLink(const StreamLink&) = delete;
  StreamLink& operator=(const StreamLink&) = delete;

  int fd() const noexcept { return fd_; }
  const PeerState& state() const noexcept { return state_; }
  // Up (the handshake may still be under way): neither closed nor dead.
  bool open() const noexcept { return state_.phase() == PeerState::Phase::kUp; }
  // Bytes wait to be written (poll for POLLOUT too).
  bool wantsWrite() const noexcept { return !out_.empty() && fd_ >= 0; }

  // Reads what the socket holds and reacts to every frame (replies, death);
  // at the end of the stream the link closes (after the peer's goodbye) or
  // dies. Call when poll says the socket is readable (or hung up).
  void onReadable(uint64_t now);
  // Writes what waits. Call when poll says writable.
  void flush();
  // The opener's tick while it watches the peer: pings every quarter of the
  // timeout; the silence past the timeout, if any (see silenceFault()).
  std::optional<uint64_t> tick(uint64_t now);
  // When tick() should next run (monotonic ns).
  uint64_t nextTickNs(uint64_t now) const noexcept;
  // "peer unresponsive" in the words of the net plugin's liveness.
  Fault silenceFault(uint64_t silentNs) const { return state_.silenceFault(silentNs, {}); }
  // This end closes: a goodbye (the EOF that follows is no fault), then the
  // socket's write side shuts.
  void goodbye();

 private:
  void send(const Frame& frame);
  void die(const std::string& reason);

  PeerState state_;
  int fd_;
  Decoder decoder_;
  std::string out_;
  uint64_t pingIntervalNs_;
  uint64_t lastTickNs_ = 0;
};

}  // namespace resilient::net::liveness
