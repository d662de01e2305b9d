// Runs a function on its own thread and waits for it at most a timeout: the
// building block of threadedFinalize() and of the health checks that may block
// in a driver (CUDA synchronize). Internal to the restart library.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace resilient::restart::detail {

// Runs `fn` on a new thread named `threadName` (at most 15 characters) and
// waits up to `timeout`. An exception thrown by `fn` is rethrown here. When
// `fn` overruns, throws TimeoutError naming `what` and the timeout.
//
// A thread cannot be cancelled, so an overrunning one is detached and left to
// finish on its own. It owns everything it touches: the function object and
// its result slot live in state shared with the thread, which outlives this
// call. `fn` must therefore own what it uses (capture by value or through a
// shared_ptr, never a reference to the caller's stack). A thread that never
// returns (a device hung for good) stays blocked until the process exits.
void runBounded(std::chrono::milliseconds timeout, const std::string& what,
                const std::string& threadName, std::function<void()> fn);

// Runs every function of `fns` at once, each on its own thread named
// `threadName` (on the caller's when no thread can be made), and waits for
// all of them up to `timeout` in all. Returns the indexes of those that
// overran (detached, as above); an exception of one is swallowed (what it
// reports must go through its own side effects).
std::vector<size_t> runAllBounded(std::chrono::milliseconds timeout, const std::string& threadName,
                                  std::vector<std::function<void()>> fns);

// Threads detached by runBounded() and runAllBounded() that have not
// finished yet.
int overrunningThreads() noexcept;

}  // namespace resilient::restart::detail
