// The net plugin's one background thread per process. It
//  - runs the liveness channel: a TCP listener plus one link per peer process,
//    over which the two plugins ping while requests to the peer are
//    outstanding; an answer missing for the liveness timeout, or a link that
//    breaks without goodbye, faults the peer's busy connections;
//  - watches progress: a connection with requests outstanding and no bytes
//    moving for the progress timeout while its peer answers is "peer stuck".
// Faults are published on the connections (Core::fail), so the next call on
// them returns the error. The thread starts with the first connection or
// listen handle and stops when the core is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "blackbox/writer.h"
#include "common/socket_address.h"
#include "plugin/net/connection.h"
#include "plugin/net/handle_trailer.h"
#include "plugin/net/liveness_wire.h"

namespace resilient::net {

class Core;

struct WatchdogOptions {
  int64_t livenessTimeoutMs = 1500;
  int64_t progressTimeoutMs = 300000;  // 0: off
  uint64_t tokenDigest = 0;
  SocketAddress bindAddress;  // empty (length 0): no liveness channel
  std::string hostName;
};

// The liveness channel to one peer process.
struct PeerLink {
  enum class State {
    kConnecting,  // outgoing, TCP connect in progress
    kUp,          // open (hello sent; the peer's hello may still be on its way)
    kClosed,      // the peer said goodbye, or we closed it: not a fault
    kDead,        // broke without goodbye: the peer process is gone
  };
  int fd = -1;
  bool outgoing = false;
  State state = State::kConnecting;
  SocketAddress address;
  std::string addressText;
  // Set from the peer's hello, then immutable.
  std::atomic<uint32_t> pid{0};
  std::string host;  // written before `helloSeen` is released
  std::atomic<bool> helloSeen{false};
  liveness::Decoder decoder;
  std::string out;  // bytes waiting to be written
  uint64_t lastHeardNs = 0;
  uint64_t armedSinceNs = 0;  // first ping after idle; 0 while idle
  uint64_t lastPingNs = 0;
  uint64_t pingSeq = 0;
  int connections = 0;   // connections that use the link
  bool retired = false;  // closed and unused: freed by the thread at the end of its iteration
  std::string deathReason;
};

class Watchdog {
 public:
  // `blackbox` (may be null) receives a snapshot of every connection each tick.
  Watchdog(Core& core, WatchdogOptions options, blackbox::Writer* blackbox);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Listen side: a nonce per listen comm and the trailer that advertises it.
  uint64_t newListenNonce();
  // False when there is no liveness channel (no usable address).
  bool trailerFor(uint64_t nonce, HandleTrailer* out);
  void forgetListenNonce(uint64_t nonce);

  // Connection setup: tie a connection to the link of its peer process.
  void attachConnector(ConnectionRecord& conn, const HandleTrailer& trailer);
  void attachAcceptor(ConnectionRecord& conn, uint64_t listenNonce);
  void add(ConnectionRecord* conn);
  void remove(ConnectionRecord* conn);

  // Peer description of a connection's link, for fault messages.
  static std::string describePeer(const ConnectionRecord& conn);

 private:
  void ensureThreadLocked();
  bool ensureListenerLocked();
  void run(const std::stop_token& stop);
  void wake() noexcept;
  void handleListener(uint64_t now);
  void handleLink(PeerLink* link, uint32_t events, uint64_t now);
  void onFrame(PeerLink* link, const liveness::Frame& frame, uint64_t now);
  void startConnect(PeerLink* link);
  void flush(PeerLink* link);
  void markDead(PeerLink* link, const std::string& reason, uint64_t now);
  void closeLink(PeerLink* link);
  void reap();
  void updateEpoll(PeerLink* link);
  void scan(uint64_t now);
  void failBusy(PeerLink* link, FaultClass cls, const std::string& detail);
  void send(PeerLink* link, const liveness::Frame& frame);

  void publish(uint64_t now);

  Core& core_;
  const WatchdogOptions options_;
  blackbox::Writer* const blackbox_;

  std::mutex mutex_;  // guards everything below
  int epollFd_ = -1;
  int wakeFd_ = -1;
  int listenFd_ = -1;
  SocketAddress listenAddress_;
  uint64_t nextNonce_ = 1;
  std::set<uint64_t> listenNonces_;
  std::map<uint64_t, PeerLink*> boundNonces_;  // listen nonce -> link that bound it
  std::map<uint64_t, std::vector<ConnectionRecord*>> awaitingBind_;
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::set<ConnectionRecord*> connections_;
  std::jthread thread_;
};

}  // namespace resilient::net
