// The communicator table of the blackbox: one slot per communicator with its
// identity and progress counters. Written at init and finalize by the
// control path and, in between, by the hang detector after each scan (one
// writer at a time: both run under the tracker's registry lock).
#pragma once

#include <cstdint>

#include "plugin/profiler/context.h"
#include "resilient/blackbox.h"

namespace resilient::profiler {

// What the detector adds to a context's counters.
struct CommProgress {
  uint64_t inFlight = 0;
  uint64_t lastProgressMonoNs = 0;
  const resilient_blackbox_op* oldest = nullptr;  // oldest operation in flight, if any
};

resilient_blackbox_comm makeCommRecord(const Context& ctx, uint32_t state, uint64_t nowMonoNs,
                                       const CommProgress& progress) noexcept;

}  // namespace resilient::profiler
