// What one rank contributes to the job's health comparison at one moment:
// its send and receive links with their cumulative bytes and busy time (net
// plugin), and the times it enqueued each collective (profiler's flight
// recorder), on the wall clock so that ranks of several hosts line up, with
// how long its kernel waited for the others where the GPU measured it.
// Read from a blackbox snapshot (sampleOf) by resilient-inspect --job and by
// the restart library's monitor thread, which also ships samples through the
// store (health_json.h). Plain data; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blackbox/reader.h"

namespace resilient::jobhealth {

struct LinkSample {
  uint64_t commId = 0;
  bool send = true;
  std::string local;     // this end's address
  std::string peer;      // the other end's address
  uint32_t peerPid = 0;  // 0 unknown
  std::string peerHost;  // empty unknown
  uint64_t bytes = 0;    // completed, cumulative
  uint64_t busyNs = 0;   // with requests outstanding, cumulative
  uint64_t rttNs = 0;    // last heartbeat round trip; 0 unknown
};

// A collective this rank enqueued: NCCL orders a communicator's collectives
// the same way on every rank, so (commId, collIndex) names one collective.
struct Arrival {
  uint64_t commId = 0;
  uint64_t collIndex = 0;
  int rank = -1;   // this rank's rank in commId
  int nranks = 0;  // ranks of commId
  uint64_t wallNs = 0;
  // When this rank's previous collective of commId ended (0 unknown): the
  // time between is the rank's own (its compute), the lateness before it is
  // not (it finished the previous one late: a slow link into it).
  uint64_t prevEndWallNs = 0;
  std::string function;  // "AllReduce", "allReduce", ...; empty unknown
  // How long this rank's kernel waited at the collective's opening barrier
  // for the last rank to arrive, GPU-timed (the flight recorder's syncWaitNs
  // of a completed collective run by a symmetric kernel, profiler v7, NCCL
  // 2.31+; include/resilient/blackbox.h RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC).
  // 0 unknown: an earlier profiler version, a classic kernel (its initial
  // sync is not a wait for the peers), or a sample of an older build.
  uint64_t syncWaitNs = 0;
};

// A collective a rank is inside now: entered at `wallNs`, not ended.
struct Inside {
  uint64_t commId = 0;
  uint64_t collIndex = 0;
  uint64_t wallNs = 0;
  std::string function;
};

struct RankSample {
  int rank = -1;  // the job's rank of the process (-1 unknown)
  uint32_t pid = 0;
  std::string host;
  uint64_t wallNs = 0;  // when it was taken
  std::vector<LinkSample> links;
  std::vector<Arrival> arrivals;
  // What the rank's own code says of itself (the restart library's
  // CallContext): its last ping (wall clock; 0 none), and whether it keeps
  // the others waiting on purpose (hang protection off). A rank that pings,
  // or says so, while the others wait for it is not stuck (stuck_ranks.h).
  uint64_t lastPingWallNs = 0;
  bool waitingDeclared = false;
  // The collectives the rank is inside now (entered, not ended; shipped
  // whatever their age): a rank that waits in one is not the stuck one, and
  // the others' stuck rank is the one that never came (stuck_ranks.h).
  std::vector<Inside> inside;
};

// The sample of one process's blackbox. `rank`: the job's rank when the
// caller knows it, else -1 (then the rank of the process's first
// communicator in the profiler's table, if any). Arrivals before
// `sinceWallNs` are left out (already shipped: the detectors count an
// arrival once however often it comes, so an overlap is harmless).
RankSample sampleOf(const blackbox::Snapshot& snap, int rank, uint64_t sinceWallNs = 0);

}  // namespace resilient::jobhealth
