// The version-neutral core of the profiler plugin: tracks every
// communicator's operations from NCCL's events. The per-version adapters
// (plugin/profiler/abi/) translate each ABI version's descriptors into these
// calls.
//
// An operation's life, in NCCL 2.28's emission order (docs/reference/nccl-abi.md §2.6):
//   Coll/P2p start (user or host-callback thread)   -> enqueued, slot taken
//   Coll/P2p stop  (right after the proxy ops are posted)
//   ProxyOp / ProxyStep / KernelCh / NetPlugin events (proxy progress thread;
//     NCCL 2.31: KernelCh from its profiler thread), any of which may come
//     after the Coll/P2p stop
//   v7: KernelPhase events under each KernelCh, before it stops
//     (kernel_phase.h)
//   completion: v4+ when nChannels KernelCh events stopped; v1-v3 when the
//     last child stopped
//   the slot returns to the pool when the Coll/P2p event and every
//     ProxyOp/KernelCh/KernelPhase child have stopped, and the operation is
//     complete.
//
// Thread safety: the hot-path calls (start*, stop, record) may come from any
// thread at once; they take no lock, allocate nothing and never block. The
// control-path calls (addContext, removeContext) and the detector's scan are
// serialised by the registry mutex. NCCL never sends events for a context
// while its finalize runs.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "blackbox/writer.h"
#include "common/status.h"
#include "plugin/profiler/clock.h"
#include "plugin/profiler/context.h"
#include "plugin/profiler/handle.h"

namespace resilient::profiler {

struct TrackerOptions {
  uint32_t opsPerContext = 1024;  // NCCL_RESILIENT_PROFILER_OPS
  bool proxySteps = true;         // NCCL_RESILIENT_PROFILER_PROXY_STEPS
};

// A Coll or P2p descriptor, any version.
struct OpStart {
  uint8_t kind = 0;  // RESILIENT_BLACKBOX_OP_COLL / _P2P
  uint64_t seqNumber = 0;
  const char* func = nullptr;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  size_t count = 0;
  size_t elementSize = 0;   // 0: from the datatype string
  size_t trafficBytes = 0;  // v1, v2: used when the element size is unknown
  int rootOrPeer = -1;
  uint8_t nChannels = 0;
  uint64_t commHash = 0;  // v1-v3 descriptors carry it; 0 otherwise
  int rank = -1;
  uint64_t userTag = 0;    // v7: the call's user tag
  bool symmetric = false;  // v7: coll.isSymColl
};

class Tracker {
 public:
  // `box` may be null (no blackbox). The clock and box outlive the tracker.
  Tracker(TrackerOptions options, const Clock& clock, blackbox::Writer* box);
  ~Tracker();  // deletes the contexts NCCL did not finalize
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  const TrackerOptions& options() const noexcept { return options_; }

  // Control path. addContext allocates the context's pool and claims its
  // blackbox slot; removeContext records its unfinished operations as
  // abandoned (or hung) and frees it.
  Status addContext(const CommIdentity& id, Context** out);
  void removeContext(Context* ctx);

  // Hot path. A start returns the handle for *eHandle (nullptr: not
  // tracked); `parent` is the parentObj NCCL passed.
  void* startOp(Context* ctx, const OpStart& op) noexcept;
  void* startProxyOp(Context* ctx, void* parent, pid_t pid, uint32_t channel) noexcept;
  void* startProxyStep(Context* ctx, void* parent) noexcept;
  void* startKernelCh(Context* ctx, void* parent, uint32_t channel, uint64_t gpuStartNs) noexcept;
  void* startNetPlugin(Context* ctx, void* parent) noexcept;
  // v7: `parent` is the KernelCh event's handle; `gpuStartNs` the phase's
  // GPU start. NULL when the parent is not ours or every phase slot is open.
  void* startKernelPhase(Context* ctx, void* parent, uint32_t phase, uint64_t gpuStartNs) noexcept;
  void* startPassive(Context* ctx) noexcept;
  void stop(void* handle) noexcept;
  // recordEventState: KernelChStop with the GPU stop time, or any other state
  // (a ncclProfilerEventState_t value; proxy steps keep it per channel).
  void recordKernelStop(void* handle, uint64_t gpuStopNs) noexcept;
  // v7: ncclProfilerKernelPhaseStop with the phase's GPU end.
  void recordPhaseStop(void* handle, uint64_t gpuStopNs) noexcept;
  void recordState(void* handle, uint32_t state) noexcept;

  // Profiler v1, v2 only (no kernel-channel events): retires an operation
  // that was enqueued and never got a child event (no proxy work: an
  // intra-node operation), as completed. Called by the detector, under the
  // registry lock, some time after the enqueue; false if a child came first.
  bool retireChildless(Context& ctx, OpSlot& op, uint32_t slot) noexcept;

  // For the detector and the comm table (under registryMutex()).
  std::mutex& registryMutex() noexcept { return registry_; }
  template <class F>
  void forEachContextLocked(F&& f) {
    for (auto& c : contexts_) {
      if (Context* ctx = c.load(std::memory_order_relaxed)) {
        f(*ctx);
      }
    }
  }
  const Clock& clock() const noexcept { return clock_; }
  blackbox::Writer* blackbox() const noexcept { return box_; }
  size_t contextCount() const;

 private:
  struct Target {
    Context* ctx = nullptr;
    OpSlot* op = nullptr;
    uint64_t bits = 0;  // the handle's value (decoded on use: handle.h accessors)
    HandleKind kind() const noexcept { return handleKind(bits); }
    uint32_t channel() const noexcept { return handleChannel(bits); }
    uint32_t context() const noexcept { return handleContext(bits); }
    uint32_t slot() const noexcept { return handleSlot(bits); }
    uint32_t generation() const noexcept { return handleGeneration(bits); }
  };
  // Resolves a handle of ours to its live operation; false for NULL, passive,
  // unknown, stale or foreign values. Inline: every event runs it.
  [[gnu::always_inline]] bool resolve(const void* handle, Target* out) const noexcept;
  void markStarted(Context& ctx, OpSlot& op, const OpInfo& info) noexcept;
  void firstChild(Context& ctx, OpSlot& op, uint32_t slot) noexcept;
  void complete(Context& ctx, OpSlot& op, uint32_t slot) noexcept;
  void unref(Context& ctx, OpSlot& op, uint32_t slot) noexcept;
  void stopPhase(const Target& t) noexcept;
  void release(Context& ctx, OpSlot& op, uint32_t slot) noexcept;
  void publishComm(const Context& ctx, uint32_t state);
  uint32_t newGeneration() noexcept;

  const TrackerOptions options_;
  const Clock& clock_;
  blackbox::Writer* const box_;
  mutable std::mutex registry_;  // guards changes of contexts_ (and the detector's scans)
  std::array<std::atomic<Context*>, kMaxContexts> contexts_{};
  uint32_t nextContext_ = 0;                 // guarded by registry_: round robin, late reuse
  std::atomic<uint32_t> nextGeneration_{0};  // unique across contexts: stale handles never match
};

inline bool Tracker::resolve(const void* handle, Target* out) const noexcept {
  const uint64_t bits = handleBits(handle);
  const HandleKind kind = handleKind(bits);
  if (kind == HandleKind::kNone || kind == HandleKind::kPassive) {
    return false;
  }
  Context* ctx = contexts_[handleContext(bits)].load(std::memory_order_acquire);
  const uint32_t slot = handleSlot(bits);
  if (ctx == nullptr || slot >= ctx->capacity) {
    return false;
  }
  OpSlot* op = &ctx->slots[slot];
  if (op->generation.load(std::memory_order_acquire) != handleGeneration(bits)) {
    return false;  // released, or never ours
  }
  out->ctx = ctx;
  out->op = op;
  out->bits = bits;
  return true;
}

}  // namespace resilient::profiler
