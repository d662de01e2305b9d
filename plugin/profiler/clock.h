// The profiler's time source: the injectable clock of common/clock.h, so that
// the hang detector can be tested with a fake clock. The hot path reads it at
// most twice per operation (enqueue, first kernel channel, completion), never
// per event.
#pragma once

#include "common/clock.h"

namespace resilient::profiler {

using resilient::Clock;
using resilient::SystemClock;

}  // namespace resilient::profiler
