// ncclProfiler_v4 (NCCL 2.27.3+): init gets the communicator's identity
// (commHash 4th); Coll/P2p carry the real channel count; KernelCh has GPU
// timestamps. Coll/P2p's parent is the legacy Group (passive for us).
#include "nccl/profiler_v4.h"

#include "plugin/common/boundary.h"
#include "plugin/profiler/abi/adapter.h"
#include "resilient/blackbox.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  CommIdentity id;
  id.commHash = commHash;
  id.name = commName != nullptr ? commName : "";
  id.nNodes = nNodes;
  id.nranks = nranks;
  id.rank = rank;
  id.abiVersion = 4;
  return initContext(context, eActivationMask, id, logfn);
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* d) noexcept {
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
        op.nChannels = d->coll.nChannels;
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
        op.nChannels = d->p2p.nChannels;
        op.rank = d->rank;
        *eHandle = t->startOp(ctx, op);
        break;
      }
      case ncclProfileProxyOp:
        *eHandle = t->startProxyOp(ctx, d->parentObj, d->proxyOp.pid, d->proxyOp.channelId);
        break;
      case ncclProfileProxyStep: *eHandle = t->startProxyStep(ctx, d->parentObj); break;
      case ncclProfileKernelCh:
        *eHandle = t->startKernelCh(ctx, d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
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
                              ncclProfilerEventStateArgs_v4_t* args) noexcept {
  const uint32_t state = rawState(eState);
  const uint64_t stopNs =
      state == ncclProfilerKernelChStop && args != nullptr ? args->kernelCh.pTimer : 0;
  return recordEvent(eHandle, state, stopNs);
}

}  // namespace
}  // namespace resilient::profiler::abi

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v4_t ncclProfiler_v4 = {
    resilient::profiler::abi::kPluginName,      resilient::profiler::abi::init,
    resilient::profiler::abi::startEvent,       resilient::profiler::abi::stopEvent,
    resilient::profiler::abi::recordEventState, resilient::profiler::abi::finalizeContext,
};
