// Helpers shared by the per-version adapters (net_v6.cc … net_v11.cc): the
// only files that see NCCL's versioned structs. Each adapter is a table of
// small functions that convert arguments and call the version-neutral core
// inside the boundary guard; the calls several versions share are in
// shared_calls.h and legacy_calls.h.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/result.h"
#include "common/boundary.h"
#include "plugin/net/core.h"
#include "plugin/net/plain/plain_core.h"

namespace resilient::abi {

// The same adapters build two libraries: libnccl-net-resilient.so over the
// resilient core, and the baseline libnccl-net-tcp-plain.so (our TCP transport
// without the resilient layer) when RESILIENT_PLAIN_TCP is defined.
#if defined(RESILIENT_PLAIN_TCP) && RESILIENT_PLAIN_TCP
using CoreImpl = net::PlainCore;
inline constexpr const char* kPluginName = "ResilientTcpPlain";
#else
using CoreImpl = net::Core;
inline constexpr const char* kPluginName = "Resilient";
#endif

// What NCCL holds between calls is what the core handed out: each untyped
// pointer NCCL passes back is one of these (NCCL returns the pointers our
// listen/connect/accept/regMr/isend/irecv/iflush/init gave it, unchanged).
// This is the only place that turns them back into types.
using CoreContext = CoreImpl::ContextHandle;
using CoreListen = CoreImpl::ListenHandle;
using CoreComm = CoreImpl::CommHandle;
using CoreRequest = CoreImpl::RequestHandle;
using CoreRegion = CoreImpl::RegionHandle;

template <class T>
T* as(void* p) noexcept {
  return static_cast<T*>(p);
}

// Hands an object the core made to NCCL as its untyped pointer.
template <class T>
void handOut(T* object, void** out) noexcept {
  *out = object;
}

// The pieces of a grouped receive or a flush, typed: NCCL's arrays of
// untyped buffers, memory handles and profiler handles (n <= NCCL_PROXY_MAX_SUBS).
// Only the first n entries are written and read: the arrays are left
// uninitialised, as zeroing 1.5 KiB would cost each receive more than the
// rest of the layer (the data path).
struct Pieces {
  std::array<std::byte*, NCCL_PROXY_MAX_SUBS> data;
  std::array<transport::MemoryRegion*, NCCL_PROXY_MAX_SUBS> regions;
  std::array<transport::ProfilerHandle*, NCCL_PROXY_MAX_SUBS> phandles;
  bool profiled = false;

  // False when n is out of range.
  bool fill(int n, void** buffers, void** mhandles, void** profilerHandles) noexcept {
    if (n < 0 || n > NCCL_PROXY_MAX_SUBS) {
      return false;
    }
    profiled = profilerHandles != nullptr;
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      data[k] = static_cast<std::byte*>(buffers[i]);
      regions[k] = mhandles != nullptr ? as<CoreRegion>(mhandles[i]) : nullptr;
      phandles[k] = profiled ? static_cast<transport::ProfilerHandle*>(profilerHandles[i]) : nullptr;
    }
    return true;
  }
  transport::ProfilerHandle** profilerHandles() noexcept {
    return profiled ? phandles.data() : nullptr;
  }
};

// Our own exported net structs, so that the inner-plugin loader can refuse to
// load this library as its own inner transport.
const net::SelfIdentity& selfIdentity() noexcept;

// Runs a data-path call on the live core.
template <class Body>
ncclResult_t onCore(const char* entry, Body&& body) noexcept {
  return boundary::call(entry, [&]() -> Status {
    CoreImpl* core = CoreImpl::live();
    if (core == nullptr) {
      return invalidUsage(std::string(entry) + " called before init or after finalize");
    }
    return body(*core);
  });
}

// Sets the optional members of every exported table (optional_calls.h) to
// what the inner transport offers; called by each init once the inner
// transport is initialised.
void offerOptionalCalls(const transport::Capabilities& caps) noexcept;

// init/finalize for the versions without a per-communicator context (v6–v10):
// one shared context for the process, created by the first init and released
// when the library is unloaded (those versions have no finalize).
ncclResult_t legacyInit(ncclDebugLogger_t logger) noexcept;
CoreContext* legacyContext() noexcept;

// Fills a version's properties struct: the fields every version has, and
// those the version added (checked against the struct, so each version gets
// exactly the fields it declares).
template <class Props>
void fillProperties(const transport::Properties& in, int dev, Props* out) {
  *out = Props{};
  out->name = const_cast<char*>(in.name);
  out->pciPath = const_cast<char*>(in.pciPath);
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->speed = in.speedMbps;
  out->port = in.port;
  out->latency = in.latencyUs;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  if constexpr (requires { out->netDeviceType; }) {  // v7+: the inner transport's
    out->netDeviceType = static_cast<ncclNetDeviceType>(in.netDeviceType);
    out->netDeviceVersion = in.netDeviceVersion;
  }
  if constexpr (requires { out->regIsGlobal; }) {  // v8+
    out->regIsGlobal = in.regIsGlobal;
  }
  if constexpr (requires { out->vProps; }) {  // v9+
    out->forceFlush = in.forceFlush;
    // The inner transport's fused devices (a physical device lists itself);
    // an inner transport of <= v8 reports none: the device is itself.
    constexpr int kDevs = static_cast<int>(sizeof out->vProps.devs / sizeof out->vProps.devs[0]);
    if (in.vProps.ndevs > 0) {
      out->vProps.ndevs = std::min(in.vProps.ndevs, kDevs);
      for (int i = 0; i < out->vProps.ndevs; ++i) {
        out->vProps.devs[i] = in.vProps.devs[i];
      }
    } else {
      out->vProps.ndevs = 1;
      out->vProps.devs[0] = dev;
    }
    out->maxP2pBytes = in.maxP2pBytes;
    out->maxCollBytes = in.maxCollBytes;
  }
  if constexpr (requires { out->maxMultiRequestSize; }) {  // v11+
    out->maxMultiRequestSize = in.maxMultiRequestSize;
  }
  if constexpr (requires { out->railId; }) {  // v12: the inner device's, passed on
    out->railId = static_cast<int16_t>(in.railId);
    out->planeId = static_cast<int16_t>(in.planeId);
  }
}

}  // namespace resilient::abi
