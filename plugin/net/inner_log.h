// The logger an inner net plugin (NCCL_RESILIENT_INNER=<library>) is given.
//
// Its messages go on to NCCL's logger as they were written, with one
// addition: a WARN the inner plugin logs after this process explained a
// fault ends with " [NET/Resilient: logged after <that fault and its root
// cause>]". NCCL keeps the last WARN as the communicator's last error
// (ncclGetLastError, which PyTorch puts into its exception); a vendor plugin
// reporting a sibling request of the dead connection a moment after our
// explanation (aws-ofi-nccl reads every errored completion of its queue)
// must not leave the user with a message that names no process.
//
// Every WARN passes (NCCL records each one as the last error, whatever
// NCCL_DEBUG says); INFO and TRACE pass our level and subsystems
// (NCCL_RESILIENT_LOG_LEVEL and _SUBSYS, which inherit NCCL_DEBUG and
// NCCL_DEBUG_SUBSYS) before they are formatted: a variadic message cannot be
// passed on unformatted.
#pragma once

#include <cstdint>
#include <string_view>

#include "nccl/log.h"

namespace resilient::blackbox {
class Writer;
}

namespace resilient::net::inner_log {

// The logger to hand to the inner plugin.
ncclDebugLogger_t logger() noexcept;

// The first fault this process explains in an abort epoch: `summary` names
// its class, communicator and root cause. Later ones of the same epoch are
// not kept (a cascade's first fault is its cause).
void explained(uint32_t abortEpoch, std::string_view summary) noexcept;

// A core begins (or ends: nullptr): any explanation is forgotten, and the
// abort epoch is read from `box` (the blackbox's control word; nullptr: none,
// the epoch is 0). An explanation of an older epoch (before the restart
// library aborted the communicators) is no longer added.
void attach(const blackbox::Writer* box) noexcept;

}  // namespace resilient::net::inner_log
