// ncclProfiler_v3 (NCCL 2.26.2+): init knows only the mask, so the
// communicator's hash and our rank come from the first Coll/P2p descriptor.
// KernelCh events exist (without timestamps); nMaxChannels is an upper bound,
// so an operation completes when its last child event stops.
#include "nccl/profiler_v3.h"

#include "plugin/common/boundary.h"
#include "plugin/profiler/abi/adapter.h"
#include "resilient/blackbox.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, int* eActivationMask) noexcept {
  CommIdentity id;
  id.abiVersion = 3;
  return initContext(context, eActivationMask, id, nullptr);
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v3_t* d) noexcept {
  return boundary::call("profiler startEvent", [&]() -> ncclResult_t {
    if (eHandle == nullptr) {
      return ncclSuccess;
    }
    *eHandle = nullptr;
    auto* ctx = static_cast<Context*>(context);
    Tracker* t = liveTracker();
    if (ctx == nullptr || d == nullptr || t == nullptr) {
      return ncclSuccess;
    }
    switch (d->type) {
      case ncclProfileColl: {
        OpStart op;
        op.kind = RESILIENT_BLACKBOX_OP_COLL;
        op.seqNumber = d->coll.seqNumber;
        op.func = d->coll.func;
        op.datatype = d->coll.datatype;
        op.algo = d->coll.algo;
        op.proto = d->coll.proto;
        op.count = d->coll.count;
        op.rootOrPeer = d->coll.root;
        op.nChannels = d->coll.nMaxChannels;
        op.commHash = d->coll.commHash;
        op.rank = d->rank;
        *eHandle = t->startOp(ctx, op);
        break;
      }
      case ncclProfileP2p: {
        OpStart op;
        op.kind = RESILIENT_BLACKBOX_OP_P2P;
        op.func = d->p2p.func;
        op.datatype = d->p2p.datatype;
        op.count = d->p2p.count;
        op.rootOrPeer = d->p2p.peer;
        op.commHash = d->p2p.commHash;
        op.rank = d->rank;
        *eHandle = t->startOp(ctx, op);
        break;
      }
      case ncclProfileProxyOp:
        *eHandle = t->startProxyOp(ctx, d->parentObj, d->proxyOp.pid, d->proxyOp.channelId);
        break;
      case ncclProfileProxyStep: *eHandle = t->startProxyStep(ctx, d->parentObj); break;
      case ncclProfileKernelCh:
        *eHandle = t->startKernelCh(ctx, d->parentObj, d->kernelCh.channelId, 0);
        break;
      case ncclProfileNetPlugin: *eHandle = t->startNetPlugin(ctx, d->parentObj); break;
      default:  // Group, ProxyCtrl
        *eHandle = t->startPassive(ctx);
        break;
    }
    return ncclSuccess;
  });
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_t eState,
                              ncclProfilerEventStateArgs_v3_t* /*args*/) noexcept {
  return recordEvent(eHandle, rawState(eState), 0);
}

}  // namespace
}  // namespace resilient::profiler::abi

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v3_t ncclProfiler_v3 = {
    resilient::profiler::abi::kPluginName,      resilient::profiler::abi::init,
    resilient::profiler::abi::startEvent,       resilient::profiler::abi::stopEvent,
    resilient::profiler::abi::recordEventState, resilient::profiler::abi::finalizeContext,
};
