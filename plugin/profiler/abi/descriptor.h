// One translation of NCCL's versioned profiler descriptors (v1..v7) into
// Tracker calls: the versions differ only in which members exist and how
// some are typed (features.h), so every adapter instantiates the same code.
#pragma once

#include <cstdint>

#include "common/boundary.h"
#include "nccl/profiler_common.h"
#include "nccl/result.h"
#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/features.h"
#include "plugin/profiler/names.h"
#include "resilient/blackbox.h"

namespace resilient::profiler::abi {

// Function, datatype, algorithm and protocol, as strings (v2+) or codes (v1).
template <class Member>
void setNames(OpStart& op, const Member& m) noexcept {
  if constexpr (StringNames<Member>) {
    op.func = m.func;
    op.datatype = m.datatype;
    if constexpr (HasAlgoProto<Member>) {
      op.algo = m.algo;
      op.proto = m.proto;
    }
  } else {
    op.func = funcName(m.func);
    op.datatype = datatypeName(m.datatype);
    op.elementSize = datatypeSize(static_cast<uint32_t>(m.datatype));
    if constexpr (HasAlgoProto<Member>) {
      op.algo = algoName(m.algo);
      op.proto = protoName(m.proto);
    }
  }
}

// What coll and p2p members have in common across versions, given their
// channel count (nChannels, v1-v3 coll: nMaxChannels, v1-v3 p2p: none) and
// commHash (v1-v3).
template <class Member>
void setCommon(OpStart& op, const Member& m) noexcept {
  setNames(op, m);
  op.count = m.count;
  if constexpr (HasChannels<Member>) {
    op.nChannels = m.nChannels;
  } else if constexpr (HasMaxChannels<Member>) {
    op.nChannels = m.nMaxChannels;
  }
  if constexpr (HasCommHash<Member>) {
    op.commHash = m.commHash;
  }
  if constexpr (HasUserTag<Member>) {
    op.userTag = m.userTag;
  }
}

template <class Descr>
OpStart collOf(const Descr& d) noexcept {
  OpStart op;
  op.kind = RESILIENT_BLACKBOX_OP_COLL;
  op.seqNumber = d.coll.seqNumber;
  op.rootOrPeer = d.coll.root;
  op.rank = d.rank;
  setCommon(op, d.coll);
  if constexpr (HasTrafficBytes<decltype(d.coll)>) {
    op.trafficBytes = d.coll.trafficBytes;
  }
  if constexpr (HasSymColl<decltype(d.coll)>) {
    op.symmetric = d.coll.isSymColl;
  }
  return op;
}

template <class Descr>
OpStart p2pOf(const Descr& d) noexcept {
  OpStart op;
  op.kind = RESILIENT_BLACKBOX_OP_P2P;
  op.rootOrPeer = d.p2p.peer;
  op.rank = d.rank;
  setCommon(op, d.p2p);
  return op;
}

// The handle for one event; Group, ProxyCtrl, the v5 API events, the v6
// copy-engine events and events the version does not define get a passive
// one. Inlined into startEvent, as the hand-written adapters had it (no extra
// call per event).
template <class Descr>
[[gnu::always_inline]] inline void* startOn(Tracker& t, Context* ctx, const Descr& d) noexcept {
  if constexpr (HasKernelPhase<Descr>) {
    // Outside the switch: bit 15 does not fit the uint8_t type of v1-v4.
    if (d.type == ncclProfileKernelPhase) {
      return t.startKernelPhase(ctx, d.parentObj, d.kernelPhase.phaseId, d.kernelPhase.pTimer);
    }
  }
  switch (d.type) {
    case ncclProfileColl: return t.startOp(ctx, collOf(d));
    case ncclProfileP2p: return t.startOp(ctx, p2pOf(d));
    case ncclProfileProxyOp:
      return t.startProxyOp(ctx, d.parentObj, d.proxyOp.pid, d.proxyOp.channelId);
    case ncclProfileProxyStep: return t.startProxyStep(ctx, d.parentObj);
    case ncclProfileKernelCh:
      if constexpr (HasKernelStartTime<Descr>) {
        return t.startKernelCh(ctx, d.parentObj, d.kernelCh.channelId, d.kernelCh.pTimer);
      } else if constexpr (HasKernelCh<Descr>) {
        return t.startKernelCh(ctx, d.parentObj, d.kernelCh.channelId, 0);
      } else {
        return t.startPassive(ctx);
      }
    case ncclProfileNetPlugin:
      if constexpr (HasNetPlugin<Descr>) {
        return t.startNetPlugin(ctx, d.parentObj);
      } else {
        return t.startPassive(ctx);
      }
    default: return t.startPassive(ctx);
  }
}

// startEvent for every version.
template <class Descr>
ncclResult_t startEvent(void* context, void** eHandle, Descr* d) noexcept {
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
    *eHandle = startOn(*t, ctx, *d);
    return ncclSuccess;
  });
}

// recordEventState for every version: only the GPU stop times of
// KernelChStop (v4+) and KernelPhaseStop (v7, the same member) are read from
// the state arguments.
template <class Args>
ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_t eState, Args* args) noexcept {
  const uint32_t state = rawState(eState);
  uint64_t stopNs = 0;
  if constexpr (HasKernelStopTime<Args>) {
    if ((state == ncclProfilerKernelChStop || state == ncclProfilerKernelPhaseStop) &&
        args != nullptr) {
      stopNs = args->kernelCh.pTimer;
    }
  }
  return recordEvent(eHandle, state, stopNs);
}

}  // namespace resilient::profiler::abi
