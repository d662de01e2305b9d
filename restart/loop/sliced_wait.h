// A bounded wait made of short slices, so that something is asked between
// two of them: the loop's job barriers and the rendezvous of its
// communicators end with RankShouldRestart once the iteration is
// interrupted, instead of at their own, much longer, timeouts.
//
// Every store call a slice makes ends with the slice (store::DeadlineScope):
// a store that stops answering costs a slice, not the store's default
// timeout, and the wait ends at its own deadline with the store's error.
#pragma once

#include <algorithm>
#include <chrono>

#include "store/store.h"

namespace resilient::restart {

// Waits for at most `timeout` in slices of at most `slice` and returns what
// `wait` returns. `wait(sliceTime)` makes one slice: sliceTime() is the time
// it may take (at most `slice`, never past the deadline, at least 1 ms) and
// the slice throws SliceTimeout when that time passes. After such a slice
// `between()` runs and may throw to end the wait (an interruption); once
// the whole timeout has passed, `expired(e)`, with the last slice's
// exception, throws or returns the wait's result.
template <class SliceTimeout, class Wait, class Between, class Expired>
auto waitInSlices(std::chrono::milliseconds timeout, std::chrono::milliseconds slice, Wait&& wait,
                  Between&& between, Expired&& expired) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const Clock::time_point deadline = Clock::now() + timeout;
  const auto sliceTime = [&] {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    return std::max(milliseconds(1), std::min(slice, left));
  };
  for (;;) {
    try {
      const store::DeadlineScope bound(Clock::now() + sliceTime());
      return wait(sliceTime);
    } catch (const SliceTimeout& e) {
      between();
      if (Clock::now() >= deadline) {
        return expired(e);
      }
    }
  }
}

}  // namespace resilient::restart
