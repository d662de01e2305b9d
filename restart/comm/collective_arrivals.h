// The collectives this process enters where no profiler sees them: a torch
// process group over gloo (nccl_resilient.distributed.wait), a
// HostCommunicator whose engine runs without a profiler, any code that
// says so (CallContext::enterCollective). Per group (a name every rank of it
// gives alike), each collective's index (1, 2, ... in call order, the same on
// every rank), function, entry time and whether the process is inside it;
// the index names one collective on every rank because a group's ranks call
// its collectives in the same order (torch's requirement; ProcessGroupGloo
// pairs them by that order: ProcessGroupGloo.cpp nextTag(), torch 1.13 and
// 2.x; the host engine runs them in call order, hostengine/engine.h);
// the health exchange ships them with the profiler's arrivals
// (jobhealth::Arrival, commId = a hash of the group's name), so that
// stragglers and stuck ranks are found in such jobs too.
//
// Threads: any; a mutex (one enter and one leave per collective, never on
// NCCL's data path). One per process (process()).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "jobhealth/sample.h"

namespace resilient::restart {

class CollectiveArrivals {
 public:
  static CollectiveArrivals& process();

  // The process enters the next collective of `group`, in which it is rank
  // `rank` of `nranks`; returns the collective's index. Entering again
  // before leaving leaves the previous one.
  uint64_t enter(std::string_view group, std::string_view function, int rank, int nranks);
  // The process left the collective of `group` it is inside (no-op if none).
  void leave(std::string_view group);
  // Adds the arrivals since `sinceWallNs` and the collectives it is inside
  // now to `sample`.
  void addTo(jobhealth::RankSample* sample, uint64_t sinceWallNs);

  // The commId of a group's collectives in samples and reports.
  static uint64_t commIdOf(std::string_view group) noexcept;

 private:
  struct Group {
    uint64_t commId = 0;
    uint64_t nextIndex = 1;
    bool inside = false;
    uint64_t lastEndWallNs = 0;             // when the last collective was left
    std::deque<jobhealth::Arrival> recent;  // the last few, oldest first
  };
  std::mutex mutex_;
  std::map<std::string, Group, std::less<>> groups_;
};

}  // namespace resilient::restart
