// The embedded TCP store server: one thread running the event loop
// (common/net/event_loop.h) over non-blocking sockets, built for tens of thousands of concurrent
// clients. Each connection starts with the Hello handshake (magic, version, job token); then its
// bytes are decoded incrementally, each request applied to the StoreEngine, and replies written
// back without blocking. Waits and barriers are answered by the server when they complete or time
// out, so clients never poll. A malformed or refused peer is logged and disconnected; the server
// carries on.
//
// Runs in any process (rank 0, a launcher, a monitor) or standalone as
// `resilient-store` (tools/store/resilient_store.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "store/store.h"
#include "store/tcp/protocol.h"

namespace resilient::store::tcp {

struct ServerOptions {
  std::string host = "0.0.0.0";  // address to listen on ("::" for IPv6)
  uint16_t port = 0;             // 0: the kernel picks one (see port())
  std::string token;             // job token clients must present; empty: no check
  size_t maxFrameBytes = kDefaultMaxFrameBytes;
  size_t maxConnections = 1u << 20;
  Millis handshakeTimeout{10000};  // a connection must complete Hello within this
  int adoptListenFd = -1;          // a socket already listening (a launcher bound it first)
  // Helper threads that write large reply bursts (a barrier releasing
  // thousands) alongside the loop thread; -1: one per extra core, at most 3.
  int sendThreads = -1;
};

// Counters, readable from any thread while the server runs.
struct ServerStats {
  uint64_t connectionsOpen = 0;
  uint64_t connectionsAccepted = 0;
  uint64_t refusedToken = 0;     // wrong job token
  uint64_t refusedProtocol = 0;  // bad magic, version, malformed or oversized frames
  uint64_t refusedBusy = 0;      // over maxConnections or out of descriptors
  uint64_t requests = 0;
};

class StoreServer {
 public:
  // Binds, listens and starts the loop thread. Throws StoreError when the
  // address cannot be bound.
  explicit StoreServer(ServerOptions options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Stops the loop and closes every connection (clients see the connection
  // drop). Idempotent.
  void stop();

  uint16_t port() const noexcept;
  // The bound address, "0.0.0.0:29500".
  std::string address() const;
  ServerStats stats() const;
  uint64_t instanceId() const noexcept;

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::thread thread_;
};

}  // namespace resilient::store::tcp
