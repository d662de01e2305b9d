// NodeProxy: the job's store as one client for a whole node. The per-node
// agent (tools/run/) serves it on loopback and points its ranks and their
// monitors at it (NCCL_RESILIENT_STORE_URL); it speaks the TCP store's
// protocol to them and forwards every call to the job's store through one
// upstream client, so the store sees one client per node, not one per rank.
// Two kinds of call are aggregated:
//
// - barrier arrivals: arrivals at the same barrier generation that come while
//   the node's previous arrival at it is on its way (or within
//   `barrierLinger` of the first) go up as ONE arrival for all their ranks
//   (store::BarrierArrival::ranks), and one upstream wait releases every local
//   waiter of that generation;
// - expiring writes (the monitors' heartbeats): acknowledged once queued and
//   written together, one store::Store::setExpiringMany per `expiringLinger`.
//   A later call that touches a queued key writes the queue first (or waits
//   for the write of the queue under way), so no reader through this proxy
//   sees an older value than the one it wrote, and a plain write after an
//   expiring one of the same key wins, as on the store itself.
//
// Anything else is forwarded as it comes, on the requesting connection's
// thread (waits on threads of their own). An upstream failure that is not an
// answer (the store unreachable) closes the local connections that were
// waiting for it: their clients see the store lost, as they would without
// the proxy. When the upstream store restarts (a new instance, its state
// empty), upstreamRestarted() makes the local clients see a restart too (a
// new instance id on their next connection; the connections of the old
// instance are closed), so that they put their state back
// (restart/loop/store_restarts.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "store/store.h"

namespace resilient::store::proxy {

struct NodeProxyOptions {
  std::string host = "127.0.0.1";  // the address local clients connect to
  uint16_t port = 0;               // 0: an ephemeral port (port())
  std::string token;               // the job token local clients must present (empty: none)
  // How long a barrier arrival waits for the node's other ranks before it
  // goes up (its first batch; later ones go as soon as the previous returns).
  Millis barrierLinger{2};
  // How often queued expiring writes are written (they are acknowledged
  // when queued: a heartbeat reaches the store at most this much later).
  Millis expiringLinger{100};
};

struct NodeProxyCounters {
  uint64_t localBarrierArrivals = 0;    // barrier calls of local clients
  uint64_t upstreamBarrierCalls = 0;    // barrier calls made upstream (arrivals and waits)
  uint64_t localExpiringWrites = 0;     // setExpiring calls of local clients
  uint64_t upstreamExpiringBatches = 0; // setExpiringMany calls made upstream
};

class NodeProxy {
 public:
  // Listens at once; StoreError when it cannot.
  NodeProxy(std::shared_ptr<Store> upstream, NodeProxyOptions options);
  ~NodeProxy();
  NodeProxy(const NodeProxy&) = delete;
  NodeProxy& operator=(const NodeProxy&) = delete;

  uint16_t port() const noexcept;
  // "tcp://<host>:<port>": the URL for the node's ranks.
  std::string url() const;
  // The upstream store was restarted: every local connection is closed and
  // the next ones see a new instance. Only takes note (safe from a store
  // client's onServerRestart); the proxy's own thread acts.
  void upstreamRestarted() noexcept;
  NodeProxyCounters counters() const;

  class Service;

 private:
  std::shared_ptr<Service> service_;  // its threads hold it too
};

}  // namespace resilient::store::proxy
