// Stragglers: per communicator, who arrived at each collective last and by
// how much (the arrival skew), over a window; a rank that is persistently
// last by more than a threshold is reported (docs/observability.md,
// "Stragglers").
//
// Arrivals come from the profiler's flight recorder on every rank
// (health_sample.h). A collective counts once every rank of its communicator
// reported it. Who was last, and its lag, by one of two rules:
//
//  - GPU-timed, where every rank has the collective's sync wait (profiler v7,
//    NCCL 2.31+, a symmetric kernel: how long its kernel waited at the
//    opening barrier for the last rank, on its GPU's clock): the rank that
//    waited least is the last to arrive, and its lag is the median of the
//    others' waits minus its own. Durations on each GPU's own clock: no clock
//    is compared across hosts, and it sees a rank whose GPU is late while its
//    host enqueued in time. The host gaps below do not bound it (a host that
//    enqueues ahead of its GPU has no gap to show).
//  - Wall clock, where any rank lacks it: the last enqueue; its lag is its
//    arrival minus the median arrival, or less: only the part that is its
//    own (its time since its previous collective ended, beyond the median
//    rank's; a rank that finished late because a slow link feeds it is not a
//    straggler). Ranks of several hosts compare as well as their clocks agree
//    (NTP: well under the default threshold of 20 ms).
//
// Only collectives whose last rank lagged by the threshold or more are
// judged (those that waited for someone): a rank last in three quarters of at
// least 8 of them in the window is the straggler. Single-threaded (the
// caller's).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "jobhealth/report.h"
#include "jobhealth/sample.h"

namespace resilient::jobhealth {

struct StragglerOptions {
  uint64_t minLagNs = 20000000ull;     // NCCL_RESILIENT_STRAGGLER_LAG_MS
  uint64_t windowNs = 10000000000ull;  // NCCL_RESILIENT_STRAGGLER_WINDOW_MS
  double fraction = 0.75;              // last in at least this share of the collectives that waited
  int minCollectives = 8;              // fewer that waited in the window: no verdict
};

// A rank's standing on one communicator in the current window (the live
// view, the metrics' straggler score).
struct RankLateness {
  uint64_t commId = 0;
  ProcessEnd rank;
  int collectives = 0;  // complete collectives of the communicator in the window
  int waited = 0;       // of them, those whose last rank lagged by the threshold or more
  int lastCount = 0;    // of those, the rank was last
  uint64_t lagNs = 0;   // median lag when it was last
  double score = 0;     // lastCount / waited
  bool straggler = false;
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options) : options_(options) {}

  // One round of every rank's samples (arrivals already given are ignored).
  // Returns the ranks newly found persistently last.
  std::vector<HealthReport> update(const std::vector<RankSample>& ranks);
  const std::vector<RankLateness>& standings() const { return standings_; }
  // Collectives every rank reported so far (all communicators).
  uint64_t compared() const { return compared_; }

 private:
  struct Collective {
    std::vector<uint64_t> wallNs;      // by rank; 0 not yet
    std::vector<uint64_t> prevEndNs;   // by rank: its previous collective's end; 0 unknown
    std::vector<uint64_t> syncWaitNs;  // by rank: GPU-timed wait at the opening; 0 unknown
    int seen = 0;
    uint64_t firstNs = 0;
  };
  struct Done {
    uint64_t wallNs;  // the last arrival
    uint64_t collIndex;
    int lastRank;
    uint64_t lagNs;
  };
  struct Comm {
    int nranks = 0;
    std::map<uint64_t, Collective> pending;
    // Complete collectives of the last two windows, oldest first (the last
    // window is judged; the one before keeps their arrivals from counting
    // again), and their indices.
    std::deque<Done> done;
    std::set<uint64_t> doneIndices;
    std::map<int, ProcessEnd> who;  // the comm's rank -> the process
    std::set<int> reported;
  };

  static uint64_t ownLag(const Collective& c, size_t lastRank, uint64_t arrivalLag);
  // The last rank of a complete collective and its lag (the rules above).
  static std::pair<size_t, uint64_t> lastOf(const Collective& c);

  StragglerOptions options_;
  std::map<uint64_t, Comm> comms_;
  std::vector<RankLateness> standings_;
  uint64_t compared_ = 0;
};

}  // namespace resilient::jobhealth
