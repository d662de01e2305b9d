// Threads as ranks: runs one restart Loop per thread on a shared in-process
// store and collects what each rank's run() ended with.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "resilient/restart/options.hpp"
#include "resilient/restart/timeline.hpp"
#include "resilient/restart/wrapper.hpp"
#include "store/memory_store.h"

namespace resilient::test {

// Options for threads as ranks: no monitor process, no blackbox, short
// intervals and timeouts (ordering rules kept).
restart::Options threadRankOptions(int rank, int worldSize);

struct RankOutcome {
  std::exception_ptr error;  // null: run() returned
  restart::State state;
  std::vector<restart::TimelineEvent> timeline;
  std::string errorText() const;
};

// Runs the ranks of a world of `worldSize` (`only`: just these; empty: all),
// each with threadRankOptions() changed by `adjust` and the function
// `fn(rank, ctx)`; returns when every rank's run() ended.
std::vector<RankOutcome> runRanks(
    int worldSize, const std::function<void(int rank, restart::Options&)>& adjust,
    const std::function<void(int rank, restart::CallContext&)>& fn,
    std::shared_ptr<store::Store> store = nullptr, const std::vector<int>& only = {});

// A wrapped function for runRanks: rank `culprit` throws runtime_error(`what`)
// in iteration 0, the others wait there until the restart cancels them; later
// iterations return at once.
std::function<void(int rank, restart::CallContext&)> throwsInFirstIteration(int culprit,
                                                                           std::string what);

// Runs one rank's Loop on the calling thread (`join`: as a process that
// joins the running job, NCCL_RESILIENT_RESTART_JOIN; `followStoreRestarts`:
// LoopEnvironment's) and returns how run() ended.
RankOutcome runRank(std::shared_ptr<store::Store> store, restart::Options options, bool join,
                    const std::function<void(restart::CallContext&)>& fn,
                    std::function<void(std::function<void()>)> followStoreRestarts = nullptr);

// What a rank's monitor process does when its rank dies (here: when its
// thread "dies"): fault record, terminated mark, counted at the iteration
// barrier.
void recordDeath(store::Store& store, const std::string& jobId, int rank, int worldSize,
                 int iteration);

}  // namespace resilient::test
