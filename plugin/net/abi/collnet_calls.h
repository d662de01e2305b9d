// The exported CollNet tables (collnet_v6.cc ... collnet_v12.cc): NCCL's
// ncclCollNetPlugin_vN over the core's CollNet calls (core.h, "CollNet"),
// each call in the boundary guard. Only libnccl-net-resilient.so has them:
// the plain TCP baseline has no CollNet.
//
// NCCL looks ncclCollNetPlugin_vN up in our library (src/plugin/net.cc,
// ncclNetPluginLoad) and, for every communicator, calls our net init, then
// collnet init (v11+: per communicator; before: NCCL's adapter calls it
// once, src/plugin/net/net_v6..v10.cc ncclCollNet_init, and copies the
// members after it); a failed init disables CollNet silently
// (ncclNetPluginInit). So when the inner library has no CollNet our init
// fails with an INFO only and leaves nothing behind. The optional members
// (regMrDmaBuf, iallgather, ireducescatter, makeVDevice) are set in init to
// exactly what the inner CollNet has: NCCL calls a CollNet's regMrDmaBuf
// without a NULL check when its ptrSupport has NCCL_PTR_DMABUF
// (src/transport/coll_net.cc, sendProxyConnect), and ptrSupport is passed
// through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/log.h"
#include "common/signature.h"
#include "plugin/net/abi/adapter.h"
#include "plugin/net/abi/legacy_calls.h"
#include "plugin/net/abi/optional_calls.h"
#include "plugin/net/abi/shared_calls.h"

namespace resilient::abi::collnet {

static_assert(std::is_same_v<CoreImpl, net::Core>,
              "CollNet is exported over the resilient core only");

// Sets every exported CollNet table's optional members (collnet_lifetime.cc).
void offerAll(const transport::CollCapabilities& caps) noexcept;
// v6-v10: the one context of the process, made by the first init over the
// live core (collnet_lifetime.cc); nullptr before.
ncclResult_t legacyInit(ncclDebugLogger_t logger) noexcept;
CoreContext* legacyContext() noexcept;

// The live core when it has a CollNet, else nullptr with an INFO saying why.
inline net::Core* coreWithCollNet() noexcept {
  net::Core* core = net::Core::live();
  if (core == nullptr || core->collNet() == nullptr) {
    RES_INFO(NCCL_NET | NCCL_INIT, "CollNet not offered: %s",
             core == nullptr ? "the net plugin is not initialised"
                             : "the inner transport has no CollNet");
    return nullptr;
  }
  return core;
}

// v11+: per communicator. Quietly refused without an inner CollNet.
inline ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t /*logger*/) noexcept {
  *ctx = nullptr;
  net::Core* core = coreWithCollNet();
  if (core == nullptr) {
    return ncclInternalError;  // NCCL disables CollNet (src/plugin/net.cc, ncclNetPluginInit)
  }
  return boundary::call("collnet init", [&]() -> Status {
    CoreContext* c = nullptr;
    if (Status st = core->collInitContext(commId, &c); !st.ok()) {
      // NCCL disables CollNet and goes on (ncclNetPluginInit): INFO, not WARN.
      RES_INFO(NCCL_NET | NCCL_INIT, "CollNet init failed: %s", st.toString().c_str());
      return st;
    }
    offerAll(core->collNet()->capabilities());
    handOut(c, ctx);
    return {};
  });
}

inline ncclResult_t finalize(void* ctx) noexcept {
  return onCore("collnet finalize",
                [&](CoreImpl& c) { return c.finalizeContext(as<CoreContext>(ctx)); });
}

inline ncclResult_t devices(int* ndev) noexcept {
  return onCore("collnet devices", [&](CoreImpl& c) -> Status {
    *ndev = 0;
    if (c.collNet() == nullptr) {
      return invalidUsage("collnet devices: no CollNet");
    }
    return c.collNet()->devices(ndev);
  });
}

template <class Props>
ncclResult_t getProperties(int dev, Props* props) noexcept {
  return onCore("collnet getProperties", [&](CoreImpl& c) -> Status {
    if (c.collNet() == nullptr) {
      return invalidUsage("collnet getProperties: no CollNet");
    }
    transport::Properties in;
    RESILIENT_TRY(c.collNet()->properties(dev, &in));
    fillProperties(in, dev, props);
    return {};
  });
}

inline Status listenOn(CoreImpl& c, CoreContext* ctx, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  net::CollListenRecord* l = nullptr;
  RESILIENT_TRY(c.collListen(ctx, dev, static_cast<std::byte*>(handle), &l));
  handOut(l, listenComm);
  return {};
}

inline ncclResult_t listenCtx(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return onCore("collnet listen", [&](CoreImpl& c) {
    return listenOn(c, as<CoreContext>(ctx), dev, handle, listenComm);
  });
}

inline ncclResult_t listenLegacy(int dev, void* handle, void** listenComm) noexcept {
  return onCore("collnet listen",
                [&](CoreImpl& c) { return listenOn(c, legacyContext(), dev, handle, listenComm); });
}

// Control path, once per comm (src/transport/coll_net.cc, sharedConnect).
inline ncclResult_t connect(void* handles[], int nranks, int rank, void* listenComm,
                            void** collComm) noexcept {
  return onCore("collnet connect", [&](CoreImpl& c) -> Status {
    *collComm = nullptr;
    if (nranks <= 0 || rank < 0 || rank >= nranks || handles == nullptr) {
      return invalidUsage("collnet connect: rank " + std::to_string(rank) + " of " +
                          std::to_string(nranks));
    }
    std::vector<std::byte*> typed(static_cast<size_t>(nranks));
    for (int i = 0; i < nranks; ++i) {
      typed[static_cast<size_t>(i)] = static_cast<std::byte*>(handles[i]);
    }
    CoreComm* comm = nullptr;
    RESILIENT_TRY(
        c.collConnect(typed.data(), nranks, rank, *as<net::CollListenRecord>(listenComm), &comm));
    handOut(comm, collComm);
    return {};
  });
}

inline ncclResult_t reduceSupport(int dataType, int redOp, int* supported) noexcept {
  return onCore("collnet reduceSupport", [&](CoreImpl& c) {
    return c.reduceSupport(transport::Reduction{dataType, redOp}, supported);
  });
}

// Count: int up to v8, size_t after.
template <class Count>
ncclResult_t iallreduce(void* collComm, void* send, void* recv, Count count, int dataType,
                        int redOp, void* sendMh, void* recvMh, void** request) noexcept {
  return onCore("iallreduce", [&](CoreImpl& c) -> Status {
    *request = nullptr;
    if constexpr (std::is_signed_v<Count>) {
      if (count < 0) {
        return invalidUsage("iallreduce: negative count");
      }
    }
    CoreRequest* r = nullptr;
    RESILIENT_TRY(c.iallreduce(*as<CoreComm>(collComm), static_cast<std::byte*>(send),
                               static_cast<std::byte*>(recv), static_cast<size_t>(count),
                               transport::Reduction{dataType, redOp}, as<CoreRegion>(sendMh),
                               as<CoreRegion>(recvMh), &r));
    handOut(r, request);
    return {};
  });
}

// NCCL's pieces typed (at most kMaxParts; v8's uint32_t sizes widened).
inline constexpr int kMaxParts = 16;
template <class Sge>
bool typedPieces(int n, const Sge* in, transport::CollPiece* out) noexcept {
  if (n < 0 || n > kMaxParts) {
    return false;
  }
  for (int i = 0; i < n; ++i) {
    out[i] =
        transport::CollPiece{as<CoreRegion>(in[i].mhandle), static_cast<std::byte*>(in[i].address),
                             static_cast<size_t>(in[i].size)};
  }
  return true;
}

template <class Sge>
ncclResult_t iallgather(void* collComm, void* send, int nRecvParts, Sge* recvParts,
                        size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void* sendMh,
                        void** request) noexcept {
  return onCore("iallgather", [&](CoreImpl& c) -> Status {
    *request = nullptr;
    transport::CollPiece parts[kMaxParts];
    if (!typedPieces(nRecvParts, recvParts, parts)) {
      return invalidUsage("iallgather: " + std::to_string(nRecvParts) + " pieces");
    }
    CoreRequest* r = nullptr;
    RESILIENT_TRY(c.iallgather(*as<CoreComm>(collComm), static_cast<std::byte*>(send), nRecvParts,
                               parts,
                               transport::CollWindow{bytesPerRank, windowOffset, windowBytes},
                               as<CoreRegion>(sendMh), &r));
    handOut(r, request);
    return {};
  });
}

template <class Sge>
ncclResult_t ireducescatter(void* collComm, int nSendParts, Sge* sendParts, void* recv,
                            size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                            int dataType, int redOp, void* recvMh, void** request) noexcept {
  return onCore("ireducescatter", [&](CoreImpl& c) -> Status {
    *request = nullptr;
    transport::CollPiece parts[kMaxParts];
    if (!typedPieces(nSendParts, sendParts, parts)) {
      return invalidUsage("ireducescatter: " + std::to_string(nSendParts) + " pieces");
    }
    CoreRequest* r = nullptr;
    RESILIENT_TRY(
        c.ireducescatter(*as<CoreComm>(collComm), nSendParts, parts, static_cast<std::byte*>(recv),
                         transport::CollWindow{bytesPerRank, windowOffset, windowBytes},
                         transport::Reduction{dataType, redOp}, as<CoreRegion>(recvMh), &r));
    handOut(r, request);
    return {};
  });
}

inline ncclResult_t iflush(void* collComm, void* data, int size, void* mhandle,
                           void** request) noexcept {
  return onCore("collnet iflush", [&](CoreImpl& c) -> Status {
    *request = nullptr;
    CoreRequest* r = nullptr;
    RESILIENT_TRY(c.collIflush(*as<CoreComm>(collComm), static_cast<std::byte*>(data), size,
                               as<CoreRegion>(mhandle), &r));
    handOut(r, request);
    return {};
  });
}

inline ncclResult_t test(void* request, int* done, int* size) noexcept {
  return shared::test(request, done, size);  // a CollNet request is a RequestRecord too
}

inline ncclResult_t closeColl(void* collComm) noexcept {
  return onCore("closeColl", [&](CoreImpl& c) { return c.closeColl(as<CoreComm>(collComm)); });
}

inline ncclResult_t closeListen(void* listenComm) noexcept {
  return onCore("collnet closeListen", [&](CoreImpl& c) {
    return c.collCloseListen(as<net::CollListenRecord>(listenComm));
  });
}

template <class VProps>
ncclResult_t makeVDevice(int* d, VProps* props) noexcept {
  return onCore("collnet makeVDevice", [&](CoreImpl& c) -> Status {
    if (c.collNet() == nullptr) {
      return invalidUsage("collnet makeVDevice: no CollNet");
    }
    transport::VirtualDevice v;
    RESILIENT_TRY(optional::virtualDevice(*props, "collnet makeVDevice", &v));
    return c.collNet()->makeVDevice(v, d);
  });
}

// A version's table: the members every CollNet has; the optional ones stay
// NULL until init offers them (offer).
template <class T>
T table() {
  T t{};
  t.name = kPluginName;
  if constexpr (requires { t.finalize; }) {  // v11+: per-communicator contexts
    t.init = &init;
    t.listen = &listenCtx;
  } else {
    t.init = &legacyInit;
    t.listen = &listenLegacy;
  }
  t.devices = &devices;
  using Props = std::remove_pointer_t<typename Signature<decltype(T::getProperties)>::template Param<1>>;
  t.getProperties = &getProperties<Props>;
  t.connect = &connect;
  t.reduceSupport = &reduceSupport;
  if constexpr (std::is_same_v<typename Signature<decltype(T::regMr)>::template Param<2>, int>) {
    t.regMr = &legacy::regMrInt;  // v6/v7
  } else {
    t.regMr = &shared::regMr;
  }
  t.deregMr = &shared::deregMr;
  using Count = typename Signature<decltype(T::iallreduce)>::template Param<3>;
  t.iallreduce = &iallreduce<Count>;
  t.iflush = &iflush;
  t.test = &test;
  t.closeColl = &closeColl;
  t.closeListen = &closeListen;
  if constexpr (requires { t.finalize; }) {
    t.finalize = &finalize;
  }
  return t;
}

// Sets table's optional members to ours where `caps` has them, NULL where
// not; written only when they change (NCCL may be reading them).
template <class T>
void offer(T& table, const transport::CollCapabilities& caps) noexcept {
  using optional::offerMember;
  offerMember(table.regMrDmaBuf, caps.regMrDmaBuf, &optional::regMrDmaBuf);
  if constexpr (requires { table.iallgather; }) {  // v8+
    using Sge =
        std::remove_pointer_t<typename Signature<decltype(T::iallgather)>::template Param<3>>;
    offerMember(table.iallgather, caps.iallgather, &iallgather<Sge>);
    offerMember(table.ireducescatter, caps.ireducescatter, &ireducescatter<Sge>);
  }
  if constexpr (requires { table.makeVDevice; }) {  // v9+
    using VProps =
        std::remove_pointer_t<typename Signature<decltype(T::makeVDevice)>::template Param<1>>;
    offerMember(table.makeVDevice, caps.makeVDevice, &makeVDevice<VProps>);
  }
}

}  // namespace resilient::abi::collnet
