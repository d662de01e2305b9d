// Stuck ranks: a rank that is alive but keeps the others of a communicator
// waiting in a collective it does not enter (a busy loop, a hung data
// loader, C code holding the GIL, a kernel of its own that never ends),
// named live (docs/observability.md, "Stuck ranks"). Frozen and dead ranks
// are the liveness link's and the pidfd's (restart/monitor); this is what
// answers heartbeats and still does not come.
//
// From every rank's samples (health_sample.h), per communicator, what each
// member entered last and whether it is inside a collective now. A member
// is stuck when
//  - some members are inside collective N and entered it `timeoutNs` or
//    more before the member's own sample, which still lacks N;
//  - the member is inside no collective at all (one that waits elsewhere is
//    a victim of someone further down the chain, not the cause);
//  - it has entered an earlier collective of the communicator (the first
//    collective after a communicator forms, after a restart, waits for every
//    rank's start-up: never judged);
//  - its own code did not say it is busy on purpose: no ping
//    (CallContext::ping) within `timeoutNs` before its sample, hang
//    protection not off (a checkpoint writer says so, or is done within the
//    timeout). The ping is judged against the rank's own sample, not the
//    others' arrival: a rank may well ping just after a peer entered the
//    next collective.
// A rank not in a sample (a spare) is in no communicator. Each member is
// named once per collective. Single-threaded (the caller's).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "jobhealth/report.h"
#include "jobhealth/sample.h"

namespace resilient::jobhealth {

struct StuckRankOptions {
  uint64_t timeoutNs = 8000000000ull;  // NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS
};

class StuckRankDetector {
 public:
  explicit StuckRankDetector(StuckRankOptions options) : options_(options) {}

  // One round of every rank's samples. Returns the members newly found stuck.
  std::vector<HealthReport> update(const std::vector<RankSample>& ranks);

 private:
  struct Member {
    ProcessEnd who;
    uint64_t lastIndex = 0;   // the last collective it entered
    uint64_t lastWallNs = 0;  // when
    // From its latest sample:
    uint64_t sampleWallNs = 0;
    uint64_t lastPingWallNs = 0;
    bool declared = false;
    bool insideAny = false;
    uint64_t insideHere = 0;  // the collective of this communicator it is inside; 0 none
  };
  struct Comm {
    std::map<int, Member> members;                // by rank in the communicator
    std::map<uint64_t, std::string> functions;    // by collective
    std::set<std::pair<int, uint64_t>> reported;  // (member, collective)
  };

  StuckRankOptions options_;
  std::map<uint64_t, Comm> comms_;
};

}  // namespace resilient::jobhealth
