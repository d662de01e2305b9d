#include "plugin/profiler/comm_table.h"

#include "blackbox/writer.h"

namespace resilient::profiler {

resilient_blackbox_comm makeCommRecord(const Context& ctx, uint32_t state, uint64_t nowMonoNs,
                                       const CommProgress& progress) noexcept {
  resilient_blackbox_comm c{};
  c.state = state;
  c.commId = ctx.commHash.load(std::memory_order_relaxed);
  c.rank = ctx.rank.load(std::memory_order_relaxed);
  c.nranks = ctx.nranks;
  c.nNodes = ctx.nNodes;
  c.abiVersion = static_cast<uint32_t>(ctx.abiVersion);
  blackbox::copyText(c.name, ctx.name);
  c.initWallNs = ctx.initWallNs;
  c.initMonoNs = ctx.initMonoNs;
  c.updatedMonoNs = nowMonoNs;
  c.collEnqueued = ctx.collCounter.load(std::memory_order_relaxed);
  c.collStarted = ctx.collStarted.load(std::memory_order_relaxed);
  c.collCompleted = ctx.collCompleted.load(std::memory_order_relaxed);
  c.p2pEnqueued = ctx.p2pCounter.load(std::memory_order_relaxed);
  c.p2pCompleted = ctx.p2pCompleted.load(std::memory_order_relaxed);
  c.inFlight = progress.inFlight;
  c.lastEnqueueMonoNs = ctx.lastEnqueueMonoNs.load(std::memory_order_relaxed);
  c.lastProgressMonoNs = progress.lastProgressMonoNs;
  for (size_t f = 0; f < ctx.completedByFunc.size(); ++f) {
    c.completedByFunc[f] = ctx.completedByFunc[f].load(std::memory_order_relaxed);
  }
  c.flightWritten = ctx.flightWritten.load(std::memory_order_relaxed);
  c.faults = ctx.faults.load(std::memory_order_relaxed);
  c.droppedEvents = ctx.dropped.load(std::memory_order_relaxed);
  if (progress.oldest != nullptr) {
    c.oldest = *progress.oldest;
    c.oldest.seq = 0;
  }
  return c;
}

}  // namespace resilient::profiler
