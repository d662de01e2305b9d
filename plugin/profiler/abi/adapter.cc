#include "plugin/profiler/abi/adapter.h"

#include <exception>

#include "common/boundary.h"
#include "common/log.h"

namespace resilient::profiler::abi {

int eventMask(int abiVersion, bool proxySteps) noexcept {
  int mask = ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp;
  if (proxySteps) {
    mask |= ncclProfileProxyStep;
  }
  if (abiVersion >= 3) {
    mask |= ncclProfileKernelCh;
  }
  if (abiVersion >= 7) {
    mask |= ncclProfileKernelPhase;
  }
  return mask;
}

ncclResult_t initContext(void** context, int* eActivationMask, const CommIdentity& id,
                         ncclDebugLogger_t logger) noexcept {
  return boundary::call("profiler init", [&]() -> ncclResult_t {
    if (context == nullptr) {
      return ncclSuccess;
    }
    *context = nullptr;
    Status error;
    Plugin* plugin = Plugin::acquire(logger, &error);
    if (plugin == nullptr) {
      RES_WARN(NCCL_PROFILE | NCCL_INIT, "profiler disabled for communicator 0x%llx: %s",
               static_cast<unsigned long long>(id.commHash), error.toString().c_str());
      return ncclSuccess;
    }
    if (!plugin->enabled()) {
      if (eActivationMask != nullptr) {
        __atomic_store_n(eActivationMask, 0, __ATOMIC_RELAXED);
      }
      Plugin::release(plugin);
      RES_INFO(NCCL_PROFILE | NCCL_INIT, "profiler off (NCCL_RESILIENT_PROFILER=0)");
      return ncclSuccess;
    }
    Context* ctx = nullptr;
    Status s;
    try {
      s = plugin->tracker().addContext(id, &ctx);
    } catch (const std::exception& e) {
      s = systemError(std::string("profiler: ") + e.what(), 0);
    }
    if (!s.ok()) {
      Plugin::release(plugin);
      RES_WARN(NCCL_PROFILE | NCCL_INIT,
               "profiler disabled for communicator 0x%llx (NCCL continues without it): %s",
               static_cast<unsigned long long>(id.commHash), s.toString().c_str());
      return ncclSuccess;
    }
    const int mask = eventMask(id.abiVersion, plugin->options().tracker.proxySteps);
    if (eActivationMask != nullptr) {
      __atomic_store_n(eActivationMask, mask, __ATOMIC_RELAXED);
    }
    *context = ctx;
    RES_INFO(NCCL_PROFILE | NCCL_INIT,
             "profiler v%d tracking communicator 0x%llx rank %d of %d (event mask 0x%x, "
             "collective timeout %lld ms)",
             id.abiVersion, static_cast<unsigned long long>(id.commHash), id.rank, id.nranks, mask,
             static_cast<long long>(plugin->options().collTimeoutMs));
    return ncclSuccess;
  });
}

ncclResult_t initIdentified(int abiVersion, void** context, int* eActivationMask, uint64_t commHash,
                            const char* commName, int nNodes, int nranks, int rank,
                            ncclDebugLogger_t logger) noexcept {
  return boundary::call("profiler init", [&]() -> ncclResult_t {
    CommIdentity id;  // the name's copy may throw
    id.commHash = commHash;
    id.name = commName != nullptr ? commName : "";
    id.nNodes = nNodes;
    id.nranks = nranks;
    id.rank = rank;
    id.abiVersion = abiVersion;
    return initContext(context, eActivationMask, id, logger);
  });
}

ncclResult_t finalizeContext(void* context) noexcept {
  return boundary::call("profiler finalize", [&]() -> ncclResult_t {
    Plugin* plugin = Plugin::live();
    if (context == nullptr || plugin == nullptr || !plugin->enabled()) {
      return ncclSuccess;  // init failed or disabled: nothing was acquired
    }
    plugin->tracker().removeContext(static_cast<Context*>(context));
    Plugin::release(plugin);
    return ncclSuccess;
  });
}

ncclResult_t stopEvent(void* eHandle) noexcept {
  return boundary::call("profiler stopEvent", [&]() -> ncclResult_t {
    if (Tracker* t = liveTracker()) {
      t->stop(eHandle);
    }
    return ncclSuccess;
  });
}

ncclResult_t recordEvent(void* eHandle, uint32_t state, uint64_t kernelStopNs) noexcept {
  return boundary::call("profiler recordEventState", [&]() -> ncclResult_t {
    Tracker* t = liveTracker();
    if (t == nullptr) {
      return ncclSuccess;
    }
    if (state == ncclProfilerKernelChStop) {
      t->recordKernelStop(eHandle, kernelStopNs);
    } else if (state == ncclProfilerKernelPhaseStop) {
      t->recordPhaseStop(eHandle, kernelStopNs);
    } else {
      t->recordState(eHandle, state);
    }
    return ncclSuccess;
  });
}

}  // namespace resilient::profiler::abi
