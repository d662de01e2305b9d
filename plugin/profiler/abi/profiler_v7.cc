// ncclProfiler_v7 (NCCL 2.31+): the version NCCL 2.31 looks for first
// (2.31.2 src/plugin/profiler.cc, ncclProfilerPluginLoad: v7, then v6 ... v1).
// v6's events and calls, plus KernelPhase events (each kernel channel's
// initial sync, compute and final sync, GPU-timed: kernel_phase.h), whose
// initial sync goes to the flight recorder, and the calls' user tags. NCCL
// turns KernelCh on itself when KernelPhase is asked for
// (ncclProfilerEnforceMaskDeps); we ask for both.
#include "nccl/profiler_v7.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  return initIdentified(7, context, eActivationMask, commId, commName, nNodes, nranks, rank, logfn);
}

}  // namespace
}  // namespace resilient::profiler::abi

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v7_t, ncclProfilerEventStateArgs_v7_t>() ==
              abi::Features{.exactChannels = true,
                            .kernelCh = true,
                            .gpuTimes = true,
                            .netPlugin = true,
                            .userTag = true,
                            .symColl = true,
                            .kernelPhase = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v7_t ncclProfiler_v7 = {
    abi::kPluginName,
    abi::init,
    abi::startEvent<ncclProfilerEventDescr_v7_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v7_t>,
    abi::finalizeContext,
};
