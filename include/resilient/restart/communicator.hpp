// Communicators: what the restart loop creates for every iteration, aborts
// when a restart begins and re-creates afterwards (docs/design.md, "Communicator").
//
// The loop builds this iteration's communicators with the factories given in
// Options once the rank assignment is known (active ranks only; spares get
// none), hands them to the wrapped function through CallContext, and on a
// fault calls abort() on each of them, from the monitor thread, while the
// wrapped function may be blocked inside one. Users can also register their
// own communicators (CallContext::registerCommunicator): they are aborted the
// same way.
//
// Stock implementations: NCCL (nccl_communicator.hpp) and the host engine for
// runs without a GPU (host_communicator.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resilient/restart/state.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // "nccl comm 0x1f2e… rank 2/6" (for log lines and the timeline).
  virtual std::string describe() const = 0;
  // Interrupts every operation in flight and makes later ones fail at once.
  // Safe from any thread, at any time, more than once; returns promptly
  // (bounded by the implementation's own abort, e.g. ncclCommAbort). The
  // object stays valid: the loop destroys it later, after finalize.
  virtual void abort() noexcept = 0;
  // A failure the communicator noticed on its own (ncclCommGetAsyncError,
  // a dead connection), or nullopt while it is healthy.
  virtual std::optional<std::string> asyncError() noexcept = 0;
  // What is wrong with the calling thread's state for this communicator's
  // library (NCCL: a group left open on this thread, which would swallow
  // every later collective), or nullopt. The loop asks on its own thread
  // after each restart's abort and after the previous communicators were
  // freed; a finding makes the rank leave. Default: nothing to check.
  virtual std::optional<std::string> checkThread() noexcept { return std::nullopt; }
};
using CommunicatorPtr = std::shared_ptr<Communicator>;

// Bytes the ranks of one iteration exchange while they create a communicator
// (NCCL unique ids, listen handles): keys live under this iteration's prefix
// of the job's store, so an old iteration's ids are never read by a new one.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Publishes `value` under `key` for this iteration.
  virtual void publish(std::string_view key, std::string_view value) = 0;
  // Waits (woken by the store, no polling) until `key` is published, at
  // most `timeout`; throws TimeoutError naming the key.
  virtual std::string lookup(std::string_view key, std::chrono::milliseconds timeout) = 0;
  // Every rank's `mine` in rank order (ranks of `State::rank` numbering,
  // active ranks only: the communicator's members). `round` names the
  // exchange (one name per exchange within an iteration).
  virtual std::vector<std::string> allGather(std::string_view round, std::string_view mine,
                                             std::chrono::milliseconds timeout) = 0;
  // A factory that waits for its peers by other means (its connections)
  // calls this now and then: the loop shows the rank's progress to its
  // monitor (waiting for a peer is not hanging). Never throws.
  virtual void waiting() noexcept {}
};

// What a factory gets to build one communicator of an iteration.
struct CommunicatorSetup {
  const State& state;      // this iteration (active: activeRank / activeWorldSize)
  Rendezvous& rendezvous;  // this iteration's exchange
  std::string name;        // the factory's name in Options (unique per job)
  // The same factory's communicator of the previous iteration (aborted or
  // revoked, not yet destroyed), and the members of it that are gone: their
  // ranks in that communicator. A factory may shrink it instead of building
  // from scratch when only ranks left (NCCL ≥ 2.27: ncclCommShrink).
  CommunicatorPtr previous;
  std::vector<int> removedRanks;
  bool onlyRemovals = false;             // no rank joined or moved: shrink is possible
  std::chrono::milliseconds timeout{0};  // for the whole creation
  // Members that joined since the previous iteration (spares activated):
  // their ranks in the new communicator. When they are the last ranks and
  // the others only closed up, a factory may grow the (shrunk) previous
  // communicator instead of building anew (NCCL >= 2.29: ncclCommGrow).
  std::vector<int> joinedRanks;
  // Records a step of the creation in the loop's timeline (may be empty).
  std::function<void(const std::string& phase, const std::string& detail)> record;
  // The factory hands the loop how to abort the creation under way (what it
  // waits on: a peer's handle, a connect or accept to a frozen peer); the
  // loop calls it when a restart begins before the factory returned, at
  // once if one already has, and never after the factory handed it an empty
  // function (do that before what it aborts is gone). May be empty (no loop).
  // The host communicator (our own engine and rendezvous) hands one; the
  // NCCL factory does not, and relies on nothing of NCCL here (its creation
  // stays bounded by its own timeout, as before).
  std::function<void(std::function<void()> abort)> abortWith;
};

// Builds one communicator for the active ranks of an iteration, or throws
// (the iteration then fails like any fault of this rank).
using CommunicatorFactory = std::function<CommunicatorPtr(const CommunicatorSetup&)>;

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
