#include "plugin/net/blackbox_table.h"

#include "plugin/net/liveness/peer_link.h"

namespace resilient::net {

void publishConnections(blackbox::Writer& box, const std::set<ConnectionRecord*>& connections,
                        uint64_t monoNs, uint64_t wallNs) {
  box.heartbeat(monoNs, wallNs);
  for (ConnectionRecord* conn : connections) {
    resilient_blackbox_connection c{};
    c.state =
        conn->fault() != nullptr ? RESILIENT_BLACKBOX_CONN_FAULTED : RESILIENT_BLACKBOX_CONN_OPEN;
    c.commId = conn->commId();
    switch (conn->direction()) {
      case ConnectionRecord::Direction::kSend: c.direction = 0; break;
      case ConnectionRecord::Direction::kRecv: c.direction = 1; break;
      case ConnectionRecord::Direction::kColl: c.direction = 2; break;
    }
    blackbox::copyText(c.local, conn->identity.local.text);
    blackbox::copyText(c.peer, conn->identity.peer.text);
    if (const liveness::PeerLink* link = conn->link.load(std::memory_order_relaxed)) {
      c.peerPid = link->state.pid();
      c.rttNs = link->state.rttNs();
      if (link->state.helloSeen()) {
        blackbox::copyText(c.peerHost, link->state.host());
      }
    }
    c.completedRequests = conn->completedRequests();
    c.completedBytes = conn->bytesCompleted();
    c.outstandingRequests = static_cast<uint64_t>(conn->outstanding());
    c.outstandingBytes = conn->outstandingBytes();
    c.lastProgressMonoNs = conn->lastProgressNs();
    c.updatedMonoNs = monoNs;
    c.busyNs = conn->busyNs;
    box.writeConnection(conn->blackboxSlot, c);
  }
}

}  // namespace resilient::net
