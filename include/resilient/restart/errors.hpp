// The exceptions of the restart library (docs/reference/restart-model.md §1.2, "Exceptions").
//
// RestartError is the base of everything the library throws. Two of them steer
// the loop rather than report a failure:
//  - RankShouldRestart: a restart is under way; the library's own wait helpers
//    (CallContext::checkCancelled, waits on communicators) throw it so that the
//    wrapped function unwinds. The wrapped function must let it pass (catch it
//    only to rethrow).
//  - RestartAbort: stop restarting. Thrown by a hook (e.g. the retry
//    controller's limits) or by the wrapped function, it ends the job on every
//    rank: terminate hooks run and Wrapper::run rethrows it.
// Any other exception from the wrapped function is a fault of this rank: it is
// published, every rank restarts, and the next iteration sees it in
// State::fnException.
#pragma once

#include <stdexcept>
#include <string>

#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

class RestartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Stop restarting: the loop ends on every rank (terminal, like the reference's
// BaseException path).
class RestartAbort : public RestartError {
 public:
  using RestartError::RestartError;
};

// A restart is under way: unwind out of the wrapped function.
class RankShouldRestart : public RestartError {
 public:
  using RestartError::RestartError;
};

// This rank was terminated by the rank assignment (e.g. its host was dropped,
// or it is unhealthy) and leaves the job; the others go on without it.
class RankDiscarded : public RestartError {
 public:
  using RestartError::RestartError;
};

// A health check found this rank unfit; the rank is terminated.
class HealthCheckError : public RestartError {
 public:
  using RestartError::RestartError;
};

// A health check found that only a new process can use this rank's GPU again
// (a sticky CUDA error poisons the context for the life of the process; the
// GPU's recovery action asks for a reset): the rank leaves the job, and
// whoever started the process may start a new one in its place. Under
// resilient-run (NCCL_RESILIENT_RESTART_EXIT_FOR_NEW_PROCESS=1) the process
// exits with kExitNeedsNewProcess instead of Wrapper::run throwing this.
class RankNeedsNewProcess : public HealthCheckError {
 public:
  using HealthCheckError::HealthCheckError;
};

// A joiner (a replacement process waiting to be admitted) whose joiner number
// another process holds, drawn from a store that restarted before the job's
// ranks put its queue back: it leaves, and whoever started it may start
// another, which draws a number of its own (docs/restart.md, "The agent").
// Not a failure of the process or of its node.
class JoinerWithdrew : public RankNeedsNewProcess {
 public:
  using RankNeedsNewProcess::RankNeedsNewProcess;
};

// The exit status of a rank that left for a new process (sysexits' EX_TEMPFAIL:
// "try again"): resilient-run replaces it (within --max-restarts and
// --node-max-restarts, which count every new process but a withdrawn
// joiner's).
inline constexpr int kExitNeedsNewProcess = 75;
// The exit status of a joiner that withdrew (JoinerWithdrew; sysexits'
// EX_PROTOCOL): resilient-run starts another process in its place without
// counting it against its limits.
inline constexpr int kExitWithdrew = 76;

// The per-rank fault counter passed its limit (a HealthCheckError).
class FaultCounterExceeded : public HealthCheckError {
 public:
  using HealthCheckError::HealthCheckError;
};

// A hook or a phase overran its timeout (finalize, health check, barrier).
class TimeoutError : public RestartError {
 public:
  using RestartError::RestartError;
};

// The coordination store did not answer within an operation's bound (a
// barrier, a rendezvous): nothing can be coordinated, so the rank leaves the
// loop with this error instead of restarting. The message names the store.
class StoreUnavailable : public TimeoutError {
 public:
  using TimeoutError::TimeoutError;
};

// A bug or an impossible state inside the library (never the user's fault).
class InternalError : public RestartError {
 public:
  using RestartError::RestartError;
};

// Options that break the ordering rules (soft < hard < barrier timeout, ...)
// or out of range; the message names the option and the rule.
class ConfigError : public RestartError {
 public:
  using RestartError::RestartError;
};

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
