// One tracked operation (a collective or a p2p op): the slot of a
// context's pool that its Coll/P2p event took, until its last child event.
//
// Concurrency: every field the hot path touches is atomic. `info` is written
// once by the thread that starts the operation, before it publishes the
// slot's generation, and read by other threads (kernel-channel completion,
// the detector) word by word with a generation check, seqlock style: a
// reader that saw the generation change discards what it read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "plugin/profiler/handle.h"

namespace resilient::profiler {

// How an operation is known to be complete.
enum class Completion : uint8_t {
  kChannels = 0,  // profiler v4+: nChannels kernel channels stopped (the Inspector's rule)
  kChildren = 1,  // v1-v3: the last child event stopped after the first one started
};

// The operation's description, immutable while the slot holds it.
struct OpInfo {
  uint64_t opIndex = 0;    // 1-based ordinal among the communicator's operations
  uint64_t collIndex = 0;  // 1-based ordinal among its collectives; 0 for p2p
  uint64_t seqNumber = 0;  // NCCL's per-function counter (collectives)
  uint64_t count = 0;
  uint64_t bytes = 0;  // 0 unknown
  uint64_t enqueueMonoNs = 0;
  uint64_t userTag = 0;        // v7: the call's user tag (0 untagged)
  const char* func = nullptr;  // NCCL's static strings (or ours for v1 codes)
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  int32_t rootOrPeer = -1;
  uint8_t kind = 0;  // RESILIENT_BLACKBOX_OP_COLL / _P2P
  uint8_t funcIndex = 0;
  uint8_t nChannels = 0;  // 0 unknown
  Completion completion = Completion::kChildren;
  bool symmetric = false;  // v7: run by a symmetric kernel (coll.isSymColl)
};
static_assert(sizeof(OpInfo) % 8 == 0 && std::is_trivially_copyable_v<OpInfo>);

// Bits of OpSlot::flags.
namespace opflag {
inline constexpr uint32_t kEnqueued = 1u << 0;    // the Coll/P2p event stopped (proxy ops posted)
inline constexpr uint32_t kStarted = 1u << 1;     // a kernel channel (v1, v2: proxy op) started
inline constexpr uint32_t kChildSeen = 1u << 2;   // some child event started
inline constexpr uint32_t kComplete = 1u << 3;    // completion recorded
inline constexpr uint32_t kReleased = 1u << 4;    // the slot went back to the pool
inline constexpr uint32_t kByChildren = 1u << 5;  // Completion::kChildren (set at start)
inline constexpr uint32_t kP2p = 1u << 6;         // a p2p operation (set at start)
inline constexpr int kChannelsShift = 8;          // bits 8..15: nChannels (set at start)
}  // namespace opflag

struct alignas(64) OpSlot {
  std::atomic<uint32_t> generation{0};  // 0: free
  // References: 1 while the Coll/P2p event is open, 1 until completion
  // (kChannels) or the first child (kChildren), 1 per open ProxyOp/KernelCh.
  std::atomic<int32_t> refs{0};
  std::atomic<uint32_t> flags{0};
  std::atomic<uint32_t> proxyOps{0};         // proxy ops started
  std::atomic<uint64_t> progress{0};         // bumped by every child event
  std::atomic<uint64_t> channelsStarted{0};  // see resilient_blackbox_op
  std::atomic<uint64_t> channelsDone{0};
  std::atomic<uint64_t> startMonoNs{0};
  std::atomic<uint64_t> endMonoNs{0};
  std::atomic<uint64_t> gpuStartNs{0};
  std::atomic<uint64_t> gpuStopNs{0};
  // v7 kernel phases: the longest initial sync over the channels (GPU ns; 0
  // none seen, a phase of no measurable length counts 1), and the channels
  // whose initial_sync phase started.
  std::atomic<uint64_t> syncWaitNs{0};
  std::atomic<uint64_t> syncChannels{0};
  uint8_t stepState[kMaxChannels] = {};  // last proxy-step state per channel (__atomic builtins)
  uint8_t proxyOpen[kMaxChannels] = {};  // open proxy ops per channel (__atomic builtins)
  OpInfo info;                           // storeInfo / loadInfo only

  // The detector's own bookkeeping: only the detector touches it, under the
  // tracker's registry lock.
  struct Watch {
    uint32_t generation = 0;
    bool reported = false;
    uint64_t progress = 0;
    uint64_t changedNs = 0;  // when the detector last saw `progress` change
  } watch;

  // Clears the mutable state for a new operation (the slot is not published).
  void reset(int32_t initialRefs, uint32_t initialFlags) noexcept;
  void storeInfo(const OpInfo& value) noexcept;
  OpInfo loadInfo() const noexcept;

  uint8_t loadStepState(uint32_t channel) const noexcept {
    return __atomic_load_n(&stepState[channel], __ATOMIC_RELAXED);
  }
  uint8_t loadProxyOpen(uint32_t channel) const noexcept {
    return __atomic_load_n(&proxyOpen[channel], __ATOMIC_RELAXED);
  }
};

// Increments a counter that only needs to change, not to count exactly:
// a plain load and store, no read-modify-write on the hot path. (Two threads
// racing may lose one increment; the value still moves.)
inline void bump(std::atomic<uint64_t>& counter) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Atomic max and min (first non-zero value wins for min).
inline void storeMax(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
inline void storeMinNonZero(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while ((cur == 0 || v < cur) && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace resilient::profiler
