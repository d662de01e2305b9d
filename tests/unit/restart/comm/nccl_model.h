// The control block of nccl_model.cc: a model of NCCL's host-side
// communicator lifecycle, built as a stand-in libnccl for the restart
// library's tests on machines without a GPU (docs/restart.md, "What real
// NCCL does"). Ranks are threads of one test process; each comm is one rank.
//
// What it models, each from NCCL's source (the .cc cites file and function):
// the thread-local group depth and the calls that leak it; non-blocking
// init, shrink and grow with NCCL's exact *newcomm timing (shrink's child
// appears only when its job ends, written through the caller's pointer from
// the job's thread); a bootstrap (a communicator is ready only when all its
// members joined); the proxy's persisted error that a revoke never clears;
// ncclCommEnsureReady wherever NCCL calls it; collectives (a float sum that
// really crosses the member threads, launched or only deferred into an open
// group); the proxy threads' join on free (a 500 ms poll in NCCL); CUDA
// graph references that hold up an abort; the net plugin's reference count
// (unloaded when the last communicator is freed); 2.31's destroy barrier.
//
// What it leaves out: devices, streams (a collective's completion is read
// with nccl_model_wait, our stand-in for cudaStreamSynchronize), several
// ranks of one process sharing a commReclaim, every data type but float.
#pragma once

#include <atomic>
#include <cstddef>

struct NcclModelControl {
  // Scripted behaviour (set before the calls; reset() restores it).
  std::atomic<int> uniqueIdResult{0};  // ncclGetUniqueId's result
  std::atomic<int> initResult{0};      // an init/shrink/grow call's own result (0: its job starts)
  std::atomic<int> readyResult{0};     // the creation job's result
  std::atomic<int> initDelayMs{0};     // the job's time after the bootstrap
  std::atomic<bool> initHang{false};   // the job never ends (until aborted)
  std::atomic<int> growIdResult{0};    // ncclCommGetUniqueId's result
  std::atomic<int> growResult{0};      // ncclCommGrow's own result (0: its job starts)
  std::atomic<bool> growHang{false};   // a grow's job never ends (until aborted)
  // A transfer error that arrives just after a read: the Nth
  // ncclCommGetAsyncError from now that reads success records
  // ncclRemoteError on its communicator's proxy after it returned (a peer
  // that went away at the moment the state was polled). -1: never.
  std::atomic<int> lateErrorAfterReads{-1};
  // The proxy threads' join when a communicator is freed or revoked: NCCL's
  // proxy service thread sleeps in poll(..., 500) (proxy.cc). Tests that
  // do not measure it shorten it (reset() sets kQuickProxyJoinMs).
  std::atomic<int> proxyJoinMs{500};

  // Observations.
  std::atomic<int> uniqueIds{0};
  std::atomic<int> inits{0};
  std::atomic<int> shrinks{0};
  std::atomic<int> grows{0};      // ncclCommGrow calls by existing ranks
  std::atomic<int> growJoins{0};  // ncclCommGrow calls by new ranks
  std::atomic<int> growIds{0};    // ncclCommGetUniqueId calls
  std::atomic<int> badGrows{0};   // calls that break the grow contract
  std::atomic<int> lastGrowRanks{-1};
  std::atomic<int> revokes{0};
  std::atomic<int> aborts{0};
  std::atomic<int> finalizes{0};
  std::atomic<int> destroys{0};
  // Calls that returned with this thread's group depth raised (NCCL's
  // ncclCommDestroy on a communicator not ready, and any other).
  std::atomic<int> leakedGroups{0};
  std::atomic<int> liveComms{0};
  std::atomic<int> badConfigs{0};  // config without the magic or size, or blocking != 0
  std::atomic<int> lastShrinkFlags{-1};
  std::atomic<int> lastShrinkCount{-1};
  std::atomic<int> lastShrinkFirst{-1};
  // Stores into a caller's *newcomm made by a job thread after the call
  // had returned (every shrink's; a grow's second store).
  std::atomic<int> lateStores{0};
  std::atomic<int> pluginLoads{0};    // the net plugin loaded (first communicator)
  std::atomic<int> pluginUnloads{0};  // dlclose'd: its reference count reached 0
  // Listen comms of the net plugin left open: an init aborted before its
  // connections were accepted (net.cc closes a listen comm only after accept).
  std::atomic<int> leakedListens{0};

  static constexpr int kQuickProxyJoinMs = 5;

  void reset() {
    uniqueIdResult = 0;
    initResult = 0;
    readyResult = 0;
    initDelayMs = 0;
    initHang = false;
    growIdResult = 0;
    growResult = 0;
    growHang = false;
    lateErrorAfterReads = -1;
    proxyJoinMs = kQuickProxyJoinMs;
    uniqueIds = inits = shrinks = revokes = aborts = finalizes = destroys = leakedGroups = 0;
    grows = growJoins = growIds = badGrows = 0;
    lastGrowRanks = -1;
    badConfigs = 0;
    lastShrinkFlags = lastShrinkCount = lastShrinkFirst = -1;
    lateStores = leakedListens = 0;
  }
};

// NCCL's codes of the one data type and operation the model reduces.
inline constexpr int kNcclModelFloat32 = 7;  // ncclFloat32
inline constexpr int kNcclModelSum = 0;      // ncclSum

extern "C" {
// Exported by the model library.
typedef NcclModelControl* (*nccl_model_control_fn)();
// A transfer of `comm` failed: its proxy stores `result` (what
// ncclCommGetAsyncError reports from then on, through a revoke), and its
// collectives in flight fail. What our net plugin's error does in NCCL.
typedef void (*nccl_model_fail_transfer_fn)(void* comm, int result);
// Makes the communicator's own async state `result` (an error found by
// NCCL itself, not by its proxy).
typedef void (*nccl_model_set_async_error_fn)(void* comm, int result);
// `n` CUDA graphs captured collectives of `comm` (localPersistentRefs);
// 0 releases them.
typedef void (*nccl_model_set_graph_refs_fn)(void* comm, int n);
// Our cudaStreamSynchronize: waits until this thread's last collective on
// `comm` is done; its result (ncclSuccess, the transfer's error, or
// ncclInProgress when `timeout_ms` passed or it was never launched).
typedef int (*nccl_model_wait_fn)(void* comm, int timeout_ms);
// The collectives launched on `comm` (NCCL's opCount).
typedef long (*nccl_model_op_count_fn)(void* comm);
// The collective the model offers (float sum only); NCCL's signature.
typedef int (*nccl_model_all_reduce_fn)(const void* send, void* recv, size_t count, int datatype,
                                        int op, void* comm, void* stream);
}
