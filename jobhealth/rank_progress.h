// Who is behind: the communicator tables of several processes' blackboxes
// (one per rank, live or post-mortem) side by side, per communicator.
//
// NCCL runs a communicator's collectives in the same order on every rank, so
// the profiler's collective ordinals line up across ranks. A rank is behind
// when it completed fewer collectives than another rank of the communicator,
// or, with as many completed, enqueued fewer (it has not reached the
// collective the others wait in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blackbox/reader.h"
#include "resilient/blackbox.h"

namespace resilient::jobhealth {

struct RankProgress {
  std::string source;  // the region file
  uint32_t pid = 0;
  bool processAlive = false;
  resilient_blackbox_comm comm{};
};

struct CommComparison {
  uint64_t commId = 0;
  std::vector<RankProgress> ranks;  // by rank
  std::vector<int> behind;          // ranks behind the others (empty: all level)
  std::string summary;              // one line for humans
};

// Groups the active (and, when no active one exists for a rank, finalized)
// communicator slots of `snapshots` by commId; sorted by commId.
std::vector<CommComparison> compareRanks(const std::vector<blackbox::Snapshot>& snapshots);

}  // namespace resilient::jobhealth
