#include "plugin/net/progress_monitor.h"

#include <cstdio>

namespace resilient::net {

bool ProgressMonitor::observe(ConnectionRecord& conn, std::optional<uint64_t> bytesMoved,
                              uint64_t now) noexcept {
  const uint64_t completed = conn.completedRequests();
  const bool moved = bytesMoved.has_value() && *bytesMoved != conn.progressBytesSeen;
  const bool progressed = completed != conn.progressCompletedSeen || moved;
  const bool first = conn.lastProgressNs() == 0;
  if (first || progressed) {
    conn.progressCompletedSeen = completed;
    if (moved) {
      conn.progressBytesSeen = *bytesMoved;
    }
    conn.noteProgress(now);
  }
  return progressed && !first;
}

bool ProgressMonitor::failIfStuck(ConnectionRecord& conn, uint64_t now, PeerLiveness liveness) {
  const uint64_t timeoutNs = static_cast<uint64_t>(timeoutMs_) * 1000000ull;
  const uint64_t last = conn.lastProgressNs();
  if (timeoutNs == 0 || last == 0 || now <= last + timeoutNs) {
    return false;
  }
  char detail[200];
  snprintf(detail, sizeof detail, "no bytes moved for %.0f ms (threshold %lld ms) %s",
           static_cast<double>(now - last) / 1e6, static_cast<long long>(timeoutMs_),
           liveness == PeerLiveness::kAnswering
               ? "while the peer answers heartbeats"
               : "and no liveness link to the peer: whether its process lives is unknown");
  sink_.report(conn, {FaultClass::kPeerStuck, detail});
  return true;
}

}  // namespace resilient::net
