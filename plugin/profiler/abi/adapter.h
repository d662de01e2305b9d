// Helpers shared by the profiler's per-version adapters (profiler_v1.cc …
// profiler_v7.cc), which with descriptor.h are the only files that see NCCL's
// versioned profiler structs. init, finalize, stop and record are the same
// for every version; descriptor.h turns each version's descriptors into
// Tracker calls.
//
// Every entry point runs in the boundary guard and returns ncclSuccess: NCCL
// ignores what start/stop/record return, and a failing init only disables the
// plugin for that communicator (context NULL, later events ignored).
#pragma once

#include <cstdint>

#include "nccl/log.h"
#include "nccl/profiler_common.h"
#include "nccl/result.h"
#include "plugin/profiler/context.h"
#include "plugin/profiler/plugin.h"
#include "plugin/profiler/tracker.h"

namespace resilient::profiler::abi {

inline constexpr const char* kPluginName = "Resilient";

// The events we ask NCCL for under ABI `abiVersion`: Coll, P2p, ProxyOp,
// ProxyStep (unless turned off), KernelCh where the version has it (v3+) and
// KernelPhase (v7).
int eventMask(int abiVersion, bool proxySteps) noexcept;

// init for every version: acquires the plugin, creates the context and sets
// the activation mask.
ncclResult_t initContext(void** context, int* eActivationMask, const CommIdentity& id,
                         ncclDebugLogger_t logger) noexcept;
// init for v1-v3, which get only the mask (the communicator's hash and our
// rank come with the first Coll/P2p descriptor).
template <int AbiVersion>
ncclResult_t initMaskOnly(void** context, int* eActivationMask) noexcept {
  CommIdentity id;
  id.abiVersion = AbiVersion;
  return initContext(context, eActivationMask, id, nullptr);
}
// init for v4+, which get the communicator's identity (v4 in another order).
ncclResult_t initIdentified(int abiVersion, void** context, int* eActivationMask, uint64_t commHash,
                            const char* commName, int nNodes, int nranks, int rank,
                            ncclDebugLogger_t logger) noexcept;
ncclResult_t finalizeContext(void* context) noexcept;
ncclResult_t stopEvent(void* eHandle) noexcept;
// `state` as NCCL passed it (any value), `kernelStopNs` the KernelChStop
// (v4+) or KernelPhaseStop (v7) argument, else 0.
ncclResult_t recordEvent(void* eHandle, uint32_t state, uint64_t kernelStopNs) noexcept;

// The raw value of an event state: a newer NCCL may pass states our enum does
// not list, and loading such a value as the enum type is undefined in C++.
inline uint32_t rawState(const ncclProfilerEventState_t& state) noexcept {
  uint32_t raw = 0;
  static_assert(sizeof raw == sizeof state);
  __builtin_memcpy(&raw, &state, sizeof raw);
  return raw;
}

// The live tracker, or nullptr (no plugin, or disabled).
inline Tracker* liveTracker() noexcept {
  return detail::gLiveTracker.load(std::memory_order_acquire);
}

}  // namespace resilient::profiler::abi
