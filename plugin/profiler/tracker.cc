#include "plugin/profiler/tracker.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <memory>

#include "common/log.h"
#include "plugin/profiler/comm_table.h"
#include "plugin/profiler/flight_recorder.h"
#include "plugin/profiler/names.h"

namespace resilient::profiler {
namespace {

inline uint64_t channelBit(uint32_t channel) noexcept {
  return uint64_t{1} << channel;
}

inline uint32_t channelsOf(uint32_t flags) noexcept {
  return (flags >> opflag::kChannelsShift) & 0xffu;
}

}  // namespace

Tracker::Tracker(TrackerOptions options, const Clock& clock, blackbox::Writer* box)
    : options_(options), clock_(clock), box_(box) {}

Tracker::~Tracker() {
  for (auto& c : contexts_) {
    if (Context* ctx = c.load(std::memory_order_relaxed)) {
      removeContext(ctx);
    }
  }
}

size_t Tracker::contextCount() const {
  std::lock_guard<std::mutex> lock(registry_);
  size_t n = 0;
  for (const auto& c : contexts_) {
    n += c.load(std::memory_order_relaxed) != nullptr ? 1 : 0;
  }
  return n;
}

uint32_t Tracker::newGeneration() noexcept {
  uint32_t g = 0;
  while (g == 0) {
    g = (nextGeneration_.fetch_add(1, std::memory_order_relaxed) + 1) & kGenerationMask;
  }
  return g;
}

Status Tracker::addContext(const CommIdentity& id, Context** out) {
  if (options_.opsPerContext == 0 || options_.opsPerContext > kMaxOpsPerContext) {
    return invalidUsage("profiler: " + std::to_string(options_.opsPerContext) +
                        " operations per communicator is outside [1, " +
                        std::to_string(kMaxOpsPerContext) + "]");
  }
  std::lock_guard<std::mutex> lock(registry_);
  uint32_t index = kMaxContexts;
  for (uint32_t k = 0; k < kMaxContexts; ++k) {
    const uint32_t i = (nextContext_ + k) % kMaxContexts;
    if (contexts_[i].load(std::memory_order_relaxed) == nullptr) {
      index = i;
      break;
    }
  }
  if (index == kMaxContexts) {
    return invalidUsage("profiler: more than " + std::to_string(kMaxContexts) +
                        " communicators at once");
  }
  nextContext_ = (index + 1) % kMaxContexts;
  auto ctx = std::make_unique<Context>(index, id, options_.opsPerContext, getpid());
  ctx->initWallNs = clock_.wallNs();
  ctx->initMonoNs = clock_.monoNs();
  if (box_ != nullptr) {
    ctx->commSlot = box_->claimComm();
    if (ctx->commSlot < 0) {
      RES_WARN(NCCL_PROFILE | NCCL_INIT,
               "blackbox: all %d communicator slots are in use; communicator 0x%llx is tracked "
               "but not published",
               RESILIENT_BLACKBOX_COMMS, static_cast<unsigned long long>(id.commHash));
    }
    publishComm(*ctx, RESILIENT_BLACKBOX_COMM_ACTIVE);
  }
  contexts_[index].store(ctx.get(), std::memory_order_release);
  *out = ctx.release();
  return {};
}

void Tracker::removeContext(Context* ctx) {
  if (ctx == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> lock(registry_);
  if (ctx->index >= kMaxContexts || contexts_[ctx->index].load(std::memory_order_relaxed) != ctx) {
    return;  // not ours (or finalized twice): never delete it
  }
  contexts_[ctx->index].store(nullptr, std::memory_order_release);
  // Operations still in flight were cut short (abort, or destroy before
  // completion): they go to the flight recorder as abandoned, or as hung if
  // the detector reported them.
  for (uint32_t i = 0; i < ctx->capacity; ++i) {
    OpSlot& op = ctx->slots[i];
    if (op.generation.load(std::memory_order_acquire) == 0) {
      continue;
    }
    const uint32_t flags = op.flags.fetch_or(opflag::kReleased, std::memory_order_acq_rel);
    if ((flags & (opflag::kComplete | opflag::kReleased)) == 0) {
      const bool hung =
          op.watch.generation == op.generation.load(std::memory_order_relaxed) && op.watch.reported;
      appendFlightRecord(
          box_, *ctx,
          makeOpRecord(*ctx, op, op.loadInfo(),
                       hung ? RESILIENT_BLACKBOX_OP_HUNG : RESILIENT_BLACKBOX_OP_ABANDONED));
    }
    op.generation.store(0, std::memory_order_release);
  }
  if (box_ != nullptr) {
    publishComm(*ctx, RESILIENT_BLACKBOX_COMM_FINALIZED);
  }
  delete ctx;
}

void Tracker::publishComm(const Context& ctx, uint32_t state) {
  if (box_ != nullptr && ctx.commSlot >= 0) {
    CommProgress progress;
    progress.lastProgressMonoNs = ctx.watch.changedNs;
    box_->writeComm(ctx.commSlot, makeCommRecord(ctx, state, clock_.monoNs(), progress));
  }
}

void* Tracker::startOp(Context* ctx, const OpStart& op) noexcept {
  if (ctx == nullptr) {
    return nullptr;
  }
  uint32_t index = 0;
  if (!ctx->pool.pop(&index)) {
    ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  ctx->noteSlotUsed(index);  // before the slot's generation makes it live
  OpSlot& slot = ctx->slots[index];
  const bool coll = op.kind == RESILIENT_BLACKBOX_OP_COLL;
  OpInfo info;
  info.kind = op.kind;
  info.opIndex = ctx->opCounter.fetch_add(1, std::memory_order_relaxed) + 1;
  if (coll) {
    info.collIndex = ctx->collCounter.fetch_add(1, std::memory_order_relaxed) + 1;
  } else {
    ctx->p2pCounter.fetch_add(1, std::memory_order_relaxed);
  }
  info.seqNumber = op.seqNumber;
  info.func = op.func;
  info.datatype = op.datatype;
  info.algo = op.algo;
  info.proto = op.proto;
  info.count = op.count;
  const size_t element = op.elementSize != 0 ? op.elementSize : datatypeSize(op.datatype);
  info.bytes = element != 0 ? op.count * element : op.trafficBytes;
  info.rootOrPeer = op.rootOrPeer;
  info.funcIndex = funcIndexOf(op.func);
  info.nChannels = ctx->exactChannels ? op.nChannels : 0;  // v1-v3: an upper bound only
  info.completion = ctx->exactChannels && ctx->kernelEvents && info.nChannels > 0
                        ? Completion::kChannels
                        : Completion::kChildren;
  info.enqueueMonoNs = clock_.monoNs();
  info.userTag = op.userTag;
  info.symmetric = coll && op.symmetric;
  uint32_t flags = static_cast<uint32_t>(info.nChannels) << opflag::kChannelsShift;
  flags |= info.completion == Completion::kChildren ? opflag::kByChildren : 0;
  flags |= coll ? 0 : opflag::kP2p;
  // One reference for the open Coll/P2p event, one held until completion
  // (kChannels) or until the first child starts (kChildren).
  slot.reset(2, flags);
  slot.storeInfo(info);
  const uint32_t generation = newGeneration();
  slot.generation.store(generation, std::memory_order_release);
  ctx->lastEnqueueMonoNs.store(info.enqueueMonoNs, std::memory_order_relaxed);
  if (op.commHash != 0 && ctx->commHash.load(std::memory_order_relaxed) == 0) {
    uint64_t unknown = 0;
    ctx->commHash.compare_exchange_strong(unknown, op.commHash, std::memory_order_relaxed);
  }
  if (op.rank >= 0 && ctx->rank.load(std::memory_order_relaxed) < 0) {
    ctx->rank.store(op.rank, std::memory_order_relaxed);
  }
  return encodeHandle(
      {.kind = HandleKind::kOp, .context = ctx->index, .slot = index, .generation = generation});
}

void Tracker::markStarted(Context& ctx, OpSlot& op, const OpInfo& info) noexcept {
  if ((op.flags.fetch_or(opflag::kStarted, std::memory_order_relaxed) & opflag::kStarted) != 0) {
    return;
  }
  op.startMonoNs.store(clock_.monoNs(), std::memory_order_relaxed);
  if (info.kind == RESILIENT_BLACKBOX_OP_COLL) {
    storeMax(ctx.collStarted, info.collIndex);
  }
}

void Tracker::firstChild(Context& ctx, OpSlot& op, uint32_t slot) noexcept {
  const uint32_t flags = op.flags.fetch_or(opflag::kChildSeen, std::memory_order_relaxed);
  if ((flags & opflag::kChildSeen) == 0 && (flags & opflag::kByChildren) != 0) {
    unref(ctx, op, slot);  // the completion reference: the children hold the slot from now on
  }
}

void* Tracker::startProxyOp(Context* ctx, void* parent, pid_t pid, uint32_t channel) noexcept {
  if (ctx == nullptr) {
    return nullptr;
  }
  if (pid != ctx->pid || channel >= kMaxChannels) {
    // A PXN op of another process: its parent is not ours; do not decode it.
    return startPassive(ctx);
  }
  Target t;
  if (!resolve(parent, &t) || t.kind() != HandleKind::kOp) {
    if (parent != nullptr) {
      ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  OpSlot& op = *t.op;
  op.refs.fetch_add(1, std::memory_order_relaxed);
  op.proxyOps.fetch_add(1, std::memory_order_relaxed);
  __atomic_fetch_add(&op.proxyOpen[channel], 1, __ATOMIC_RELAXED);
  if (!t.ctx->kernelEvents) {
    // v1, v2 have no kernel-channel events: a proxy op is the sign of life.
    if (op.channelsStarted.fetch_or(channelBit(channel), std::memory_order_relaxed) == 0) {
      markStarted(*t.ctx, op, op.loadInfo());
    }
  }
  firstChild(*t.ctx, op, t.slot());
  bump(op.progress);
  bump(t.ctx->progress);
  return encodeHandle({.kind = HandleKind::kProxyOp,
                       .channel = channel,
                       .context = t.context(),
                       .slot = t.slot(),
                       .generation = t.generation()});
}

void* Tracker::startProxyStep(Context* ctx, void* parent) noexcept {
  if (ctx == nullptr) {
    return nullptr;
  }
  Target t;
  if (!resolve(parent, &t) || t.kind() != HandleKind::kProxyOp) {
    return nullptr;  // PXN (passive parent), untracked or stale
  }
  bump(t.op->progress);
  bump(t.ctx->progress);
  return encodeHandle({.kind = HandleKind::kProxyStep,
                       .channel = t.channel(),
                       .context = t.context(),
                       .slot = t.slot(),
                       .generation = t.generation()});
}

void* Tracker::startKernelCh(Context* ctx, void* parent, uint32_t channel,
                             uint64_t gpuStartNs) noexcept {
  if (ctx == nullptr || channel >= kMaxChannels) {
    return nullptr;
  }
  Target t;
  if (!resolve(parent, &t) || t.kind() != HandleKind::kOp) {
    if (parent != nullptr) {
      ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  OpSlot& op = *t.op;
  op.refs.fetch_add(1, std::memory_order_relaxed);
  if (gpuStartNs != 0) {
    storeMinNonZero(op.gpuStartNs, gpuStartNs);
  }
  if (op.channelsStarted.fetch_or(channelBit(channel), std::memory_order_relaxed) == 0) {
    markStarted(*t.ctx, op, op.loadInfo());
  }
  firstChild(*t.ctx, op, t.slot());
  bump(op.progress);
  bump(t.ctx->progress);
  return encodeHandle({.kind = HandleKind::kKernelCh,
                       .channel = channel,
                       .context = t.context(),
                       .slot = t.slot(),
                       .generation = t.generation()});
}

void* Tracker::startNetPlugin(Context* ctx, void* parent) noexcept {
  if (ctx == nullptr) {
    return nullptr;
  }
  Target t;
  if (!resolve(parent, &t)) {
    return nullptr;
  }
  bump(t.op->progress);
  bump(t.ctx->progress);
  return encodeHandle({.kind = HandleKind::kNetPlugin,
                       .channel = t.channel(),
                       .context = t.context(),
                       .slot = t.slot(),
                       .generation = t.generation()});
}

void* Tracker::startKernelPhase(Context* ctx, void* parent, uint32_t phase,
                                uint64_t gpuStartNs) noexcept {
  if (ctx == nullptr) {
    return nullptr;
  }
  Target t;
  if (!resolve(parent, &t) || t.kind() != HandleKind::kKernelCh) {
    if (parent != nullptr) {
      ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  uint32_t index = 0;
  if (!t.ctx->phasePool.pop(&index)) {
    t.ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  OpSlot& op = *t.op;
  const uint64_t channel = channelBit(t.channel());
  if (phase == kPhaseInitialSync) {
    op.syncChannels.fetch_or(channel, std::memory_order_relaxed);
  } else if (phase == kPhaseCompute &&
             (op.syncChannels.load(std::memory_order_relaxed) & channel) == 0) {
    // NCCL skips a phase of zero length (2.31.2 profilerFireKernelPhaseEvents):
    // this channel's kernel did not wait at its initial sync. 1 ns: 0 is unknown.
    storeMax(op.syncWaitNs, 1);
  }
  op.refs.fetch_add(1, std::memory_order_relaxed);  // held until the phase stops
  void* handle = encodeHandle({.kind = HandleKind::kKernelPhase,
                               .channel = index,
                               .context = t.context(),
                               .slot = t.slot(),
                               .generation = t.generation()});
  PhaseSlot& p = t.ctx->phases[index];
  p.startNs.store(gpuStartNs, std::memory_order_relaxed);
  p.phase.store(phase, std::memory_order_relaxed);
  p.owner.store(handleBits(handle), std::memory_order_release);
  bump(op.progress);
  bump(t.ctx->progress);
  return handle;
}

void* Tracker::startPassive(Context* ctx) noexcept {
  return ctx == nullptr ? nullptr
                        : encodeHandle({.kind = HandleKind::kPassive, .context = ctx->index});
}

void Tracker::stop(void* handle) noexcept {
  Target t;
  if (!resolve(handle, &t)) {
    return;
  }
  OpSlot& op = *t.op;
  const uint32_t channel = t.channel();
  switch (t.kind()) {
    case HandleKind::kOp:
      op.flags.fetch_or(opflag::kEnqueued, std::memory_order_relaxed);
      unref(*t.ctx, op, t.slot());
      return;
    case HandleKind::kProxyOp:
      if (__atomic_sub_fetch(&op.proxyOpen[channel], 1, __ATOMIC_RELAXED) == 0 &&
          !t.ctx->kernelEvents) {
        op.channelsDone.fetch_or(channelBit(channel), std::memory_order_relaxed);
      }
      bump(op.progress);
      bump(t.ctx->progress);
      unref(*t.ctx, op, t.slot());
      return;
    case HandleKind::kKernelCh: {
      const uint64_t before =
          op.channelsDone.fetch_or(channelBit(channel), std::memory_order_relaxed);
      bump(op.progress);
      bump(t.ctx->progress);
      const uint32_t flags = op.flags.load(std::memory_order_relaxed);
      const auto need = static_cast<int>(channelsOf(flags));
      if ((flags & opflag::kByChildren) == 0 && (before & channelBit(channel)) == 0 &&
          std::popcount(before) < need && std::popcount(before | channelBit(channel)) >= need) {
        complete(*t.ctx, op, t.slot());
        unref(*t.ctx, op, t.slot());  // the completion reference
      }
      unref(*t.ctx, op, t.slot());  // this channel's reference
      return;
    }
    case HandleKind::kKernelPhase: stopPhase(t); return;
    case HandleKind::kProxyStep:
    case HandleKind::kNetPlugin:
      bump(op.progress);
      bump(t.ctx->progress);
      return;
    default: return;
  }
}

void Tracker::stopPhase(const Target& t) noexcept {
  // Only the handle that owns the slot frees it: a second stop of the same
  // phase finds it free (or another phase's) and changes nothing.
  const uint32_t index = t.channel();
  uint64_t owner = t.bits;
  if (!t.ctx->phases[index].owner.compare_exchange_strong(owner, 0, std::memory_order_acq_rel)) {
    return;
  }
  t.ctx->phasePool.push(index);
  bump(t.op->progress);
  bump(t.ctx->progress);
  unref(*t.ctx, *t.op, t.slot());
}

void Tracker::recordPhaseStop(void* handle, uint64_t gpuStopNs) noexcept {
  Target t;
  if (!resolve(handle, &t) || t.kind() != HandleKind::kKernelPhase) {
    return;
  }
  const PhaseSlot& p = t.ctx->phases[t.channel()];
  if (p.owner.load(std::memory_order_acquire) != t.bits) {
    return;  // stopped already
  }
  const uint64_t startNs = p.startNs.load(std::memory_order_relaxed);
  if (p.phase.load(std::memory_order_relaxed) == kPhaseInitialSync && startNs != 0 &&
      gpuStopNs >= startNs) {
    // The longest over the channels; one of no measurable length counts 1 ns.
    storeMax(t.op->syncWaitNs, std::max<uint64_t>(gpuStopNs - startNs, 1));
  }
  bump(t.op->progress);
  bump(t.ctx->progress);
}

void Tracker::recordKernelStop(void* handle, uint64_t gpuStopNs) noexcept {
  Target t;
  if (!resolve(handle, &t) || t.kind() != HandleKind::kKernelCh) {
    return;
  }
  if (gpuStopNs != 0) {
    storeMax(t.op->gpuStopNs, gpuStopNs);
  }
  bump(t.op->progress);
  bump(t.ctx->progress);
}

void Tracker::recordState(void* handle, uint32_t state) noexcept {
  Target t;
  if (!resolve(handle, &t) || t.kind() == HandleKind::kOp) {
    return;
  }
  if (t.kind() == HandleKind::kProxyStep) {
    __atomic_store_n(&t.op->stepState[t.channel()], static_cast<uint8_t>(state), __ATOMIC_RELAXED);
  }
  bump(t.op->progress);
  bump(t.ctx->progress);
}

void Tracker::complete(Context& ctx, OpSlot& op, uint32_t /*slot*/) noexcept {
  if ((op.flags.fetch_or(opflag::kComplete, std::memory_order_acq_rel) & opflag::kComplete) != 0) {
    return;
  }
  op.endMonoNs.store(clock_.monoNs(), std::memory_order_relaxed);
  const OpInfo info = op.loadInfo();
  if (info.kind == RESILIENT_BLACKBOX_OP_COLL) {
    storeMax(ctx.collCompleted, info.collIndex);
    if (info.funcIndex < ctx.completedByFunc.size()) {
      storeMax(ctx.completedByFunc[info.funcIndex], info.seqNumber + 1);
    }
  } else {
    ctx.p2pCompleted.fetch_add(1, std::memory_order_relaxed);
  }
  appendFlightRecord(box_, ctx, makeOpRecord(ctx, op, info, RESILIENT_BLACKBOX_OP_COMPLETED));
}

bool Tracker::retireChildless(Context& ctx, OpSlot& op, uint32_t slot) noexcept {
  // Only the completion reference is left (the Coll/P2p event stopped, no
  // child started): take it. A child starting now finds the slot released
  // and is ignored as stale.
  int32_t expected = 1;
  if ((op.flags.load(std::memory_order_acquire) & opflag::kChildSeen) != 0 ||
      !op.refs.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
    return false;
  }
  complete(ctx, op, slot);
  if ((op.flags.fetch_or(opflag::kReleased, std::memory_order_acq_rel) & opflag::kReleased) == 0) {
    op.generation.store(0, std::memory_order_release);
    ctx.pool.push(slot);
  }
  return true;
}

void Tracker::unref(Context& ctx, OpSlot& op, uint32_t slot) noexcept {
  if (op.refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    release(ctx, op, slot);
  }
}

void Tracker::release(Context& ctx, OpSlot& op, uint32_t slot) noexcept {
  const uint32_t flags = op.flags.load(std::memory_order_acquire);
  if ((flags & opflag::kByChildren) != 0 && (flags & opflag::kChildSeen) != 0) {
    complete(ctx, op, slot);  // v1-v3: the last child stopped
  }
  if ((op.flags.fetch_or(opflag::kReleased, std::memory_order_acq_rel) & opflag::kReleased) != 0) {
    return;
  }
  op.generation.store(0, std::memory_order_release);
  ctx.pool.push(slot);
}

}  // namespace resilient::profiler
