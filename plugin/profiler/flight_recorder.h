// The flight recorder: per communicator, a ring in the blackbox of the last
// operations that finished (completed, or abandoned when the communicator
// went away), each with its timings (v7: also its user tag and the longest
// GPU-timed initial sync of its kernel channels, kernel_phase.h). Entries
// are written by the thread that finishes the operation, once, lock-free (a
// seqlock per entry); the index comes from the context's counter, so
// concurrent writers never share an entry.
#pragma once

#include <cstdint>

#include "blackbox/writer.h"
#include "plugin/profiler/context.h"
#include "plugin/profiler/op_slot.h"
#include "resilient/blackbox.h"

namespace resilient::profiler {

// A blackbox record of the operation in `slot` (described by `info`).
resilient_blackbox_op makeOpRecord(const Context& ctx, const OpSlot& slot, const OpInfo& info,
                                   uint32_t state) noexcept;

// Appends `record` to the context's ring (no-op without a blackbox slot).
void appendFlightRecord(blackbox::Writer* box, Context& ctx,
                        const resilient_blackbox_op& record) noexcept;

}  // namespace resilient::profiler
