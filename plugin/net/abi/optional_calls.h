// The optional members of the net ABI (DMA-BUF registration, device offload,
// NIC fusion, traffic hints): each exported table gets them exactly when the
// inner transport has them, so that NCCL sees through the wrapper what it
// would see of the inner plugin alone.
//
// When NCCL reads them: the newest version a NCCL knows (v11 in 2.28 and
// 2.29, v12 in 2.30) is called through our own struct at each use
// (src/plugin/net/net_v11.cc, getNcclNet_v11, keeps the plugin's pointer),
// its regMrDmaBuf tested once in dmaBufSupported (src/init.cc, after
// ncclNetInit); older versions are wrapped by adapters whose ncclNet_init
// calls our init first and copies the members after it
// (src/plugin/net/net_v6.cc ... net_v10.cc, and v11 under 2.30). So the
// members are set in init, once the inner transport is initialised (a
// plugin may fill its own table in its init), and never change afterwards:
// the inner transport is chosen once per process.
#pragma once

#include <string>
#include <type_traits>

#include "common/signature.h"
#include "nccl/net_common.h"
#include "plugin/net/abi/adapter.h"

namespace resilient::abi::optional {

// Sets one optional member of an exported table: `fn` when offered, else
// NULL; written only when it changes (the first init), so that a table NCCL
// reads is not written again while it reads it.
template <class Member, class Fn>
void offerMember(Member& member, bool offered, Fn fn) noexcept {
  const Fn want = offered ? fn : nullptr;
  if (member != want) {
    member = want;
  }
}

// NCCL's vProps of any version (4 devices up to v11, 8 in v12) as ours.
template <class VProps>
Status virtualDevice(const VProps& props, const char* call, transport::VirtualDevice* out) {
  constexpr int kDevs = static_cast<int>(sizeof props.devs / sizeof props.devs[0]);
  if (props.ndevs < 0 || props.ndevs > kDevs) {
    return invalidUsage(std::string(call) + ": ndevs " + std::to_string(props.ndevs) +
                        " is outside 0.." + std::to_string(kDevs));
  }
  out->ndevs = props.ndevs;
  for (int i = 0; i < props.ndevs; ++i) {
    out->devs[i] = props.devs[i];
  }
  return {};
}

inline ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle) noexcept {
  return onCore("regMrDmaBuf", [&](CoreImpl& c) -> Status {
    *mhandle = nullptr;
    CoreRegion* region = nullptr;
    RESILIENT_TRY(c.regMrDmaBuf(*as<CoreComm>(comm), static_cast<std::byte*>(data), size, type,
                                offset, fd, &region));
    handOut(region, mhandle);
    return {};
  });
}

inline ncclResult_t getDeviceMr(void* comm, void* mhandle, void** dptrMhandle) noexcept {
  return onCore("getDeviceMr", [&](CoreImpl& c) -> Status {
    *dptrMhandle = nullptr;
    transport::DeviceRegion* deviceRegion = nullptr;
    RESILIENT_TRY(c.getDeviceMr(*as<CoreComm>(comm), as<CoreRegion>(mhandle), &deviceRegion));
    *dptrMhandle = deviceRegion;  // the inner plugin's, for NCCL's device code
    return {};
  });
}

inline ncclResult_t irecvConsumed(void* recvComm, int n, void* request) noexcept {
  return onCore("irecvConsumed", [&](CoreImpl& c) {
    return c.irecvConsumed(*as<CoreComm>(recvComm), n, as<CoreRequest>(request));
  });
}

// VProps: the version's ncclNetVDeviceProps (4 devices up to v11, 8 in v12).
template <class VProps>
ncclResult_t makeVDevice(int* d, VProps* props) noexcept {
  return onCore("makeVDevice", [&](CoreImpl& c) -> Status {
    transport::VirtualDevice v;
    RESILIENT_TRY(virtualDevice(*props, "makeVDevice", &v));
    return c.makeVDevice(v, d);
  });
}

// v11 and v12 share ncclNetAttr (net_common.h). NCCL ignores the result.
inline ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v11_t* attr) noexcept {
  return onCore("setNetAttr", [&](CoreImpl& c) {
    return c.setNetAttr(as<CoreContext>(ctx), reinterpret_cast<transport::NetAttributes*>(attr));
  });
}

// Sets table's optional members to ours where `caps` has them, NULL where not.
template <class Net>
void offer(Net& table, const transport::Capabilities& caps) noexcept {
  offerMember(table.regMrDmaBuf, caps.regMrDmaBuf, &regMrDmaBuf);
  if constexpr (requires { table.getDeviceMr; }) {  // v7+
    offerMember(table.getDeviceMr, caps.getDeviceMr, &getDeviceMr);
    offerMember(table.irecvConsumed, caps.irecvConsumed, &irecvConsumed);
  }
  if constexpr (requires { table.makeVDevice; }) {  // v9+
    using VProps =
        std::remove_pointer_t<typename Signature<decltype(Net::makeVDevice)>::template Param<1>>;
    offerMember(table.makeVDevice, caps.makeVDevice, &makeVDevice<VProps>);
  }
  if constexpr (requires { table.setNetAttr; }) {  // v11+
    offerMember(table.setNetAttr, caps.setNetAttr, &setNetAttr);
  }
}

}  // namespace resilient::abi::optional
