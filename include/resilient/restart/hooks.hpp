// The loop's hooks (docs/reference/restart-model.md §1.2): initialize, abort, finalize,
// health check, completion and terminate, and ours: interrupt. In C++ a hook is a callable;
// composeX() chains several of one kind (the last one runs first, as the
// reference's Compose), and the stock hooks are factories returning one.
//
// Every hook may throw: RestartAbort ends the job on every rank; any other
// exception from initialize, finalize or a health check is a fault of this
// rank (a health check's marks the rank unhealthy, and it is terminated).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "resilient/restart/state.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

// Runs at the start of every iteration, before the health check; may change
// nothing but may throw RestartAbort (e.g. retry limits).
using InitializeFn = std::function<void(const State&)>;
// Interrupts this rank's work when a restart begins: called from the monitor
// thread while the wrapped function may still be running. Must not block for
// long and must be safe to call concurrently with the work it interrupts.
using AbortFn = std::function<void(const State&)>;
// Stops the wrapped function where the language can do it from another
// thread: called from the monitor thread the moment a restart begins
// (CallContext::cancelled() is true from then on), before any communicator
// is aborted, so that nothing the abort releases (a collective cut short,
// its buffers holding partial sums) is used by the function as a result.
// Python raises RankShouldRestart in the function's thread here; C++ code
// checks cancelled() after each collective instead. Must not block.
using InterruptFn = std::function<void(const State&)>;
// Cleans up after an interrupted iteration (e.g. frees buffers).
using FinalizeFn = std::function<void(const State&)>;
// Throws (HealthCheckError or any exception) when this rank is unfit.
using HealthCheckFn = std::function<void(const State&)>;
// After the last iteration succeeded on every rank.
using CompletionFn = std::function<void(const State&)>;
// When the loop ends in failure (RestartAbort, retry limit, rank discarded).
using TerminateFn = std::function<void(const State&)>;

// Chains hooks of one kind: the last element runs first (like the reference's
// Compose). An empty function in the list is skipped. The first exception
// stops the chain and propagates.
InitializeFn composeInitialize(std::vector<InitializeFn> hooks);
FinalizeFn composeFinalize(std::vector<FinalizeFn> hooks);
HealthCheckFn composeHealthChecks(std::vector<HealthCheckFn> hooks);
CompletionFn composeCompletion(std::vector<CompletionFn> hooks);
TerminateFn composeTerminate(std::vector<TerminateFn> hooks);
// Aborts all run, even when one throws (an abort must not leave later ones
// undone); the first exception is rethrown after the last one ran.
AbortFn composeAbort(std::vector<AbortFn> hooks);

// The stock initialize hook: throws RestartAbort once the iteration reaches
// `maxIterations` (nullopt: no limit), or when fewer than `minWorldSize` live
// ranks or `minActiveWorldSize` active ranks are left.
InitializeFn retryController(std::optional<int> maxIterations = std::nullopt, int minWorldSize = 1,
                             int minActiveWorldSize = 1);

// Runs `fn` on its own thread and waits at most `timeout` for it; overrunning
// throws TimeoutError (the thread is left to finish: it cannot be cancelled).
FinalizeFn threadedFinalize(std::chrono::milliseconds timeout, FinalizeFn fn);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
