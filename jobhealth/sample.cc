#include "jobhealth/sample.h"

#include <algorithm>
#include <cstring>

#include "common/clock.h"

namespace resilient::jobhealth {

RankSample sampleOf(const blackbox::Snapshot& snap, int rank, uint64_t sinceWallNs) {
  RankSample s;
  s.pid = snap.header.pid;
  s.host = std::string(snap.header.host, strnlen(snap.header.host, sizeof snap.header.host));
  // The writer's clocks, read together at its last heartbeat, turn its
  // monotonic times into wall-clock ones; without a heartbeat, the reader's
  // (the same host: monotonic clocks agree).
  const int64_t monoToWall =
      snap.header.heartbeatMonoNs != 0
          ? static_cast<int64_t>(snap.header.heartbeatWallNs - snap.header.heartbeatMonoNs)
          : static_cast<int64_t>(wallClockNs() - monotonicNs());
  s.wallNs = snap.header.heartbeatMonoNs != 0 ? snap.header.heartbeatWallNs : wallClockNs();
  for (const auto& c : snap.connections) {
    if (c.state != RESILIENT_BLACKBOX_CONN_OPEN) {
      continue;
    }
    LinkSample l;
    l.commId = c.commId;
    l.send = c.direction == 0;
    l.local = std::string(c.local, strnlen(c.local, sizeof c.local));
    l.peer = std::string(c.peer, strnlen(c.peer, sizeof c.peer));
    l.peerPid = c.peerPid;
    l.peerHost = std::string(c.peerHost, strnlen(c.peerHost, sizeof c.peerHost));
    l.bytes = c.completedBytes;
    l.busyNs = c.busyNs;
    l.rttNs = c.rttNs;
    s.links.push_back(std::move(l));
  }
  s.rank = rank;
  for (const auto& view : snap.comms) {
    const auto& comm = view.comm;
    if (s.rank < 0 && comm.rank >= 0) {
      s.rank = comm.rank;
    }
    if (comm.rank < 0 || comm.nranks <= 0) {
      continue;  // v1-v3 before the first operation: whose arrival it is is unknown
    }
    const auto toWall = [monoToWall](uint64_t mono) {
      return mono == 0 ? 0 : static_cast<uint64_t>(static_cast<int64_t>(mono) + monoToWall);
    };
    // The collective in flight (the flight recorder holds completed ones):
    // the rank is inside it now.
    const resilient_blackbox_op& oldest = comm.oldest;
    if (oldest.opIndex != 0 && oldest.kind == RESILIENT_BLACKBOX_OP_COLL) {
      s.inside.push_back({comm.commId, oldest.collIndex, toWall(oldest.enqueueMonoNs),
                          std::string(oldest.func, strnlen(oldest.func, sizeof oldest.func))});
    }
    uint64_t prevIndex = 0;  // the previous collective in the ring, and when it ended
    uint64_t prevEnd = 0;
    for (const auto& op : view.flight) {
      if (op.kind != RESILIENT_BLACKBOX_OP_COLL) {
        continue;
      }
      const uint64_t endBefore = prevIndex + 1 == op.collIndex ? prevEnd : 0;
      prevIndex = op.collIndex;
      prevEnd = op.state == RESILIENT_BLACKBOX_OP_COMPLETED ? op.endMonoNs : 0;
      const uint64_t wall = toWall(op.enqueueMonoNs);
      // The GPU-timed wait counts where it is one: a symmetric kernel's
      // initial sync (its opening barrier), every channel reported.
      const bool measured = (op.opFlags & RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC) != 0 &&
                            op.state == RESILIENT_BLACKBOX_OP_COMPLETED;
      if (op.enqueueMonoNs != 0 && wall >= sinceWallNs) {
        s.arrivals.push_back(
            {comm.commId, op.collIndex, comm.rank, comm.nranks, wall, toWall(endBefore),
             std::string(op.func, strnlen(op.func, sizeof op.func)), measured ? op.syncWaitNs : 0});
      }
    }
  }
  return s;
}

}  // namespace resilient::jobhealth
