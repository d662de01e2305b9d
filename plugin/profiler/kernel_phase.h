// Kernel phases (profiler ABI v7, NCCL 2.31+): a kernel channel's work in
// three GPU-timed parts, each one KernelPhase event under the channel's
// KernelCh event (docs/reference/nccl-2.31-plugins.md §1.6):
//
//   0 initial_sync   kernel start .. the end of the opening synchronization
//   1 compute        .. the end of the work loop
//   2 final_sync     .. kernel end
//
// NCCL's profiler thread emits them once the kernel finished the channel's
// work, before it stops the KernelCh event, one phase after the other: start
// (descriptor pTimer = the phase's GPU start), recordEventState
// ncclProfilerKernelPhaseStop (args kernelCh.pTimer = its GPU end), stop
// (NCCL 2.31.2 src/plugin/profiler.cc, profilerFireKernelPhaseEvents). It
// leaves out phases of zero length: a compute phase with no initial_sync
// before it on its channel means the initial sync took no measurable time.
//
// The start time has to wait for the Stop state; it is kept in a phase slot:
// each context has kPhaseSlots of them, preallocated, taken from a lock-free
// index pool at the phase's start and returned at its stop (no lock, no
// allocation per event). The slot's index travels in the handle's channel
// bits. `owner` holds the handle of the phase using the slot, 0 when free: a
// handle that does not own its slot (stopped already, or forged) is ignored.
// Written and read by whichever thread NCCL calls on (NCCL: its profiler
// thread); every field is atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace resilient::profiler {

// Phases open at once per communicator: NCCL has one at a time per
// communicator; 64 fit the handle's 6 channel bits.
inline constexpr uint32_t kPhaseSlots = 64;

// NCCL's phase ids (2.31.2 src/plugin/profiler.cc, profilerPhaseNames).
inline constexpr uint32_t kPhaseInitialSync = 0;
inline constexpr uint32_t kPhaseCompute = 1;

struct PhaseSlot {
  std::atomic<uint64_t> owner{0};    // the handle's bits while open; 0 free
  std::atomic<uint64_t> startNs{0};  // GPU %globaltimer at the phase's start
  std::atomic<uint32_t> phase{0};    // kPhase*
};

}  // namespace resilient::profiler
