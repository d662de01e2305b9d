// ncclProfiler_v1 (NCCL 2.23): like v2, but function, datatype, algorithm
// and protocol are numeric codes (ncclFunc_t, ncclDataType_t, NCCL_ALGO_*,
// NCCL_PROTO_*), turned into NCCL's own strings here.
#include "nccl/profiler_v1.h"

#include "plugin/common/boundary.h"
#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/names.h"
#include "resilient/blackbox.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, int* eActivationMask) noexcept {
  CommIdentity id;
  id.abiVersion = 1;
  return initContext(context, eActivationMask, id, nullptr);
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v1_t* d) noexcept {
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
        op.func = funcName(d->coll.func);
        op.datatype = datatypeName(d->coll.datatype);
        op.elementSize = datatypeSize(static_cast<uint32_t>(d->coll.datatype));
        op.algo = algoName(d->coll.algo);
        op.proto = protoName(d->coll.proto);
        op.count = d->coll.count;
        op.trafficBytes = d->coll.trafficBytes;
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
        op.func = funcName(d->p2p.func);
        op.datatype = datatypeName(d->p2p.datatype);
        op.elementSize = datatypeSize(static_cast<uint32_t>(d->p2p.datatype));
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
      default:  // Group, ProxyCtrl
        *eHandle = t->startPassive(ctx);
        break;
    }
    return ncclSuccess;
  });
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_t eState,
                              ncclProfilerEventStateArgs_v1_t* /*args*/) noexcept {
  return recordEvent(eHandle, rawState(eState), 0);
}

}  // namespace
}  // namespace resilient::profiler::abi

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v1_t ncclProfiler_v1 = {
    resilient::profiler::abi::kPluginName,      resilient::profiler::abi::init,
    resilient::profiler::abi::startEvent,       resilient::profiler::abi::stopEvent,
    resilient::profiler::abi::recordEventState, resilient::profiler::abi::finalizeContext,
};
