// The control block of fake_nccl.cc: a stand-in libnccl for the NCCL
// communicator's tests on machines without a GPU. It implements the calls
// the restart library makes with NCCL's non-blocking semantics (calls
// return ncclInProgress, ncclCommGetAsyncError reports it until the work is
// done), counts every call and lets a test script the results.
#pragma once

#include <atomic>
#include <cstddef>

struct FakeNcclControl {
  // Scripted behaviour (set before the calls).
  std::atomic<int> uniqueIdResult{0};  // ncclGetUniqueId's result
  std::atomic<int> initResult{7};      // ncclCommInitRankConfig's result (7: in progress)
  std::atomic<int> initPolls{2};       // polls that read ncclInProgress; -1: forever
  std::atomic<int> readyResult{0};     // the async result once the init is done
  std::atomic<int> growResult{7};      // ncclCommGrow's result (7: in progress)
  std::atomic<int> growPolls{2};       // polls a grown communicator reads ncclInProgress; -1: forever
  std::atomic<int> growIdResult{0};    // ncclCommGetUniqueId's result

  // Observations.
  std::atomic<int> uniqueIds{0};
  std::atomic<int> inits{0};
  std::atomic<int> shrinks{0};
  std::atomic<int> grows{0};      // ncclCommGrow calls by existing ranks
  std::atomic<int> growJoins{0};  // ncclCommGrow calls by new ranks
  std::atomic<int> growIds{0};    // ncclCommGetUniqueId calls
  std::atomic<int> badGrows{0};   // calls that break the grow contract (ids, ranks, busy parent)
  std::atomic<int> lastGrowRanks{-1};
  std::atomic<int> revokes{0};
  std::atomic<int> aborts{0};
  std::atomic<int> finalizes{0};
  std::atomic<int> destroys{0};
  // ncclCommDestroy calls on a communicator whose async state was an error:
  // NCCL 2.28.9 returns that error there without ending the group it began
  // (init.cc: NCCLCHECK(ncclCommEnsureReady(comm))), so every later NCCL
  // call of that thread is deferred into a group that never ends. The fake
  // returns the error and keeps the communicator, as NCCL does.
  std::atomic<int> leakedGroups{0};
  std::atomic<int> liveComms{0};
  std::atomic<int> badConfigs{0};  // config without the magic, size or blocking = 0
  std::atomic<int> lastShrinkFlags{-1};
  std::atomic<int> lastShrinkCount{-1};
  std::atomic<int> lastShrinkFirst{-1};

  void reset() {
    uniqueIdResult = 0;
    initResult = 7;
    initPolls = 2;
    readyResult = 0;
    growResult = 7;
    growPolls = 2;
    growIdResult = 0;
    uniqueIds = inits = shrinks = revokes = aborts = finalizes = destroys = leakedGroups = 0;
    grows = growJoins = growIds = badGrows = 0;
    lastGrowRanks = -1;
    badConfigs = 0;
    lastShrinkFlags = lastShrinkCount = lastShrinkFirst = -1;
  }
};

extern "C" {
// Exported by the fake library.
typedef FakeNcclControl* (*fakeNcclControl_fn)();
// Makes a ready communicator report `result` as its async error.
typedef void (*fakeNcclSetAsyncError_fn)(void* comm, int result);
// Makes its proxy report `result`: what ncclCommGetAsyncError says while the
// communicator's own state is success (NCCL keeps the proxy's error of a
// failed transfer after a revoke has settled).
typedef void (*fakeNcclSetProxyError_fn)(void* comm, int result);
}
