// ncclProfiler_v6 (NCCL 2.29+): the version NCCL 2.29 and 2.30 look for first.
// v5's events and calls; the copy-engine collective events new in v6
// (CeColl, CeSync, CeBatch: NVLink copies, no proxy and no net plugin) are
// not tracked and get passive handles, as v5's API events do.
#include "nccl/profiler_v6.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  return initIdentified(6, context, eActivationMask, commId, commName, nNodes, nranks, rank, logfn);
}

}  // namespace
}  // namespace resilient::profiler::abi

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v6_t, ncclProfilerEventStateArgs_v6_t>() ==
              abi::Features{
                  .exactChannels = true, .kernelCh = true, .gpuTimes = true, .netPlugin = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 = {
    abi::kPluginName,
    abi::init,
    abi::startEvent<ncclProfilerEventDescr_v6_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v6_t>,
    abi::finalizeContext,
};
