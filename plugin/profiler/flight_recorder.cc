#include "plugin/profiler/flight_recorder.h"

#include <bit>

#include "plugin/profiler/names.h"

namespace resilient::profiler {

resilient_blackbox_op makeOpRecord(const Context& ctx, const OpSlot& slot, const OpInfo& info,
                                   uint32_t state) noexcept {
  resilient_blackbox_op r{};
  r.state = state;
  r.commId = ctx.commHash.load(std::memory_order_relaxed);
  r.opIndex = info.opIndex;
  r.collIndex = info.collIndex;
  r.seqNumber = info.seqNumber;
  r.kind = info.kind;
  r.funcIndex = info.funcIndex;
  r.rootOrPeer = info.rootOrPeer;
  r.nChannels = info.nChannels;
  r.count = info.count;
  r.bytes = info.bytes;
  blackbox::copyText(r.func, info.func);
  blackbox::copyText(r.datatype, info.datatype);
  blackbox::copyText(r.algo, info.algo);
  blackbox::copyText(r.proto, info.proto);
  r.channelsStarted = slot.channelsStarted.load(std::memory_order_relaxed);
  r.channelsDone = slot.channelsDone.load(std::memory_order_relaxed);
  r.enqueueMonoNs = info.enqueueMonoNs;
  r.startMonoNs = slot.startMonoNs.load(std::memory_order_relaxed);
  r.endMonoNs = slot.endMonoNs.load(std::memory_order_relaxed);
  r.gpuStartNs = slot.gpuStartNs.load(std::memory_order_relaxed);
  r.gpuStopNs = slot.gpuStopNs.load(std::memory_order_relaxed);
  r.proxyOps = slot.proxyOps.load(std::memory_order_relaxed);
  r.userTag = info.userTag;
  r.syncWaitNs = slot.syncWaitNs.load(std::memory_order_relaxed);
  r.opFlags = info.symmetric ? RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC : 0;
  // The step state of the first unfinished channel, else of the lowest one seen.
  uint64_t pending = r.channelsStarted & ~r.channelsDone;
  uint64_t seen = pending != 0 ? pending : r.channelsStarted;
  r.lastStepState =
      seen != 0 ? slot.loadStepState(static_cast<uint32_t>(std::countr_zero(seen))) : 0;
  return r;
}

void appendFlightRecord(blackbox::Writer* box, Context& ctx,
                        const resilient_blackbox_op& record) noexcept {
  const uint64_t index = ctx.flightWritten.fetch_add(1, std::memory_order_relaxed);
  if (box != nullptr && ctx.commSlot >= 0) {
    box->writeFlight(ctx.commSlot, index, record);
  }
}

}  // namespace resilient::profiler
