// NcclCommunicator: an NCCL communicator made, aborted and re-made by the
// restart loop (docs/design.md, "Communicator"; docs/reference/restart-model.md §5).
//
// NCCL is loaded at run time, so that the process's own libnccl.so.2 is the
// one used: a copy already loaded by the application (or its framework) is
// found first, and only without one is the library loaded by name. Nothing
// of NCCL is linked or included here; handle() is NCCL's ncclComm_t.
//
// Creation (collective over the iteration's active ranks) uses a
// non-blocking configuration (blocking = 0) and polls
// ncclCommGetAsyncError until NCCL is done, at most setup.timeout; a
// creation that does not finish in time is aborted and reported as
// TimeoutError. When the iteration only removed ranks, the previous
// communicator was revoked (not aborted) and NCCL has ncclCommShrink
// (>= 2.27), every member agrees through the rendezvous to shrink the
// previous communicator with NCCL_SHRINK_ABORT instead of a full init, as
// long as every member's previous communicator settled without an error
// (NCCL refuses to shrink one whose proxy kept a transfer's error: then all
// make a full init in the same restart). The shrink is polled on the parent,
// as NCCL documents (its child appears only when NCCL's job ends).
// Otherwise active rank 0 makes a unique id, publishes it through the
// rendezvous and every member calls ncclCommInitRankConfig.
//
// abort() stops everything in flight, from any thread, more than once:
// ncclCommRevoke where NCCL has it (>= 2.28.7) and the options allow it (the
// handle stays valid, every later NCCL call on it fails, and the next
// iteration may shrink it), else ncclCommAbort (NCCL frees the
// communicator: handle() is null afterwards, and the wrapped function must
// not use a copy of it). The destructor finalizes a healthy communicator
// or waits for a revoke to settle, then calls ncclCommAbort; it never calls
// ncclCommDestroy (which can leave the calling thread inside an NCCL group:
// docs/restart.md, "What real NCCL does"), and does nothing after
// ncclCommAbort.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/visibility.h"

// NCCL's communicator type (ncclComm_t is `struct ncclComm*`).
struct ncclComm;

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

struct NcclOptions {
  // The library (a soname or a path).
  std::string library = "libnccl.so.2";
  // abort() revokes (NCCL >= 2.28.7) instead of aborting; needed for shrink.
  bool useRevoke = true;
  // Shrink the previous communicator when an iteration only removed ranks.
  bool useShrink = true;
  // Grow it (after a shrink when ranks also left) when spares joined as the
  // last ranks (NCCL >= 2.29).
  bool useGrow = true;
  // ncclConfig_t.netName (empty: NCCL's choice; NCCL_NET overrides it) and
  // commName (empty: "<factory name>/<iteration>").
  std::string netName;
  std::string commName;
  // Between two ncclCommGetAsyncError polls while NCCL works.
  std::chrono::milliseconds pollInterval{1};
  // How long the destructor waits for finalize (or a revoke) to settle
  // before it falls back to ncclCommAbort.
  std::chrono::milliseconds destroyTimeout{30000};
};

class NcclCommunicator final : public Communicator {
 public:
  // Throws RestartError naming the library and what is wrong when NCCL
  // cannot be loaded or is unusable, TimeoutError when creation (or the
  // id exchange) outlives setup.timeout, RestartError with NCCL's result
  // and last error text when NCCL refuses (e.g. no usable GPU).
  static std::shared_ptr<NcclCommunicator> create(const CommunicatorSetup& setup,
                                                  const NcclOptions& options);
  // A communicator someone else made (the user's, or torch's
  // ProcessGroupNCCL's), to register with CallContext::registerCommunicator:
  // the monitor thread polls its ncclCommGetAsyncError, so a fault NCCL or
  // the net plugin finds on it starts the restart at once; a restart revokes
  // it (NCCL >= 2.28.7; nothing before: its owner aborts it), and it is never
  // aborted or destroyed by the library. `options.library` must be the
  // libnccl that made it. `state` and `name` are for messages.
  static std::shared_ptr<NcclCommunicator> adopt(ncclComm* handle, const State& state,
                                                 const std::string& name,
                                                 const NcclOptions& options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // The communicator for the user's NCCL calls; null once ncclCommAbort freed it.
  ncclComm* handle() const noexcept;
  int rank() const noexcept;
  int size() const noexcept;
  // Made by ncclCommShrink from the previous iteration's communicator.
  bool shrunk() const noexcept;
  // Made by ncclCommGrow (after a shrink) with spares that joined.
  bool grown() const noexcept;
  // "2.28.9" and the library file in use.
  std::string ncclVersion() const;
  std::string libraryPath() const;

  // "nccl comm 'dp' iteration 3 rank 2/6 (0x55d1..., NCCL 2.28.9, revoked)"
  std::string describe() const override;
  void abort() noexcept override;
  // ncclCommGetAsyncError's result when it is an error, with
  // ncclGetLastError's text; nullopt while healthy, in progress, or after abort.
  std::optional<std::string> asyncError() noexcept override;
  // ncclGroupEnd as a probe of this thread's group depth (see the .cc).
  std::optional<std::string> checkThread() noexcept override;

 private:
  struct Impl;
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The factory for Options::communicators.
CommunicatorFactory ncclCommunicatorFactory(NcclOptions options = {});

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
