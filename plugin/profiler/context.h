// One communicator as the profiler sees it: its identity, its pool of
// operation slots and its table of kernel-phase slots (both preallocated at
// init) and its counters. What NCCL gets as the profiler `context` of
// init/startEvent/finalize.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "plugin/profiler/index_pool.h"
#include "plugin/profiler/kernel_phase.h"
#include "plugin/profiler/names.h"
#include "plugin/profiler/op_slot.h"

namespace resilient::profiler {

// What init tells us (v4, v5). v1-v3 init knows none of it: commHash and rank
// are learnt from the first Coll/P2p descriptor.
struct CommIdentity {
  uint64_t commHash = 0;
  std::string name;
  int rank = -1;
  int nranks = 0;
  int nNodes = 0;
  int abiVersion = 5;
};

class Context {
 public:
  Context(uint32_t index, const CommIdentity& id, uint32_t capacity, pid_t pid);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Immutable after construction.
  const uint32_t index;  // slot in the tracker's context table
  const int abiVersion;
  const pid_t pid;           // ours: a proxy op of another pid is a PXN op
  const bool kernelEvents;   // the version has KernelCh events (v3+)
  const bool exactChannels;  // nChannels is the real count (v4+)
  const std::string name;
  const int nranks;
  const int nNodes;
  uint64_t initWallNs = 0;
  uint64_t initMonoNs = 0;
  int commSlot = -1;  // blackbox communicator slot; -1 none

  // Learnt late for v1-v3 (first operation), hence atomic.
  std::atomic<uint64_t> commHash;
  std::atomic<int32_t> rank;

  // Operations.
  const uint32_t capacity;
  std::unique_ptr<OpSlot[]> slots;
  IndexPool pool;
  // One past the highest slot index ever taken from the pool: the slots at
  // and above it were never used (the pool starts at 0 and hands back the
  // slot returned last: a communicator with a few operations in flight uses
  // the first few), and the detector's scans stop there instead of reading
  // all `capacity` slots (1024 cache lines) of every communicator several
  // times a second.
  std::atomic<uint32_t> slotsUsed{0};
  void noteSlotUsed(uint32_t slot) noexcept {
    uint32_t used = slotsUsed.load(std::memory_order_relaxed);
    while (used <= slot &&
           !slotsUsed.compare_exchange_weak(used, slot + 1, std::memory_order_release,
                                            std::memory_order_relaxed)) {
    }
  }

  // Kernel phases open now (v7), kPhaseSlots of them.
  std::unique_ptr<PhaseSlot[]> phases;
  IndexPool phasePool;

  // Counters (monotonic).
  std::atomic<uint64_t> opCounter{0};    // operations started
  std::atomic<uint64_t> collCounter{0};  // collectives started
  std::atomic<uint64_t> p2pCounter{0};   // p2p operations started
  std::atomic<uint64_t> collStarted{0};  // highest collIndex whose kernels started
  std::atomic<uint64_t> collCompleted{0};
  std::atomic<uint64_t> p2pCompleted{0};
  std::array<std::atomic<uint64_t>, kFuncCount> completedByFunc{};  // last seqNumber + 1
  std::atomic<uint64_t> progress{0};  // every proxy-thread event (kernel channel, proxy op/step)
  std::atomic<uint64_t> dropped{0};   // events not tracked
  std::atomic<uint64_t> flightWritten{0};
  std::atomic<uint64_t> lastEnqueueMonoNs{0};
  std::atomic<uint64_t> faults{0};

  // The detector's own bookkeeping (detector only, under the registry lock).
  struct Watch {
    bool seen = false;
    bool silenceReported = false;
    uint64_t progress = 0;
    uint64_t changedNs = 0;
  } watch;
};

}  // namespace resilient::profiler
