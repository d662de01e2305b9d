// ncclProfiler_v5 (NCCL 2.28.3+): the version NCCL 2.28 looks for first.
// init gets commId 2nd; Coll/P2p carry the real channel count; API and
// kernel-launch events (new in v5) are not tracked and get passive handles.
#include "nccl/profiler_v5.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  return initIdentified(5, context, eActivationMask, commId, commName, nNodes, nranks, rank, logfn);
}

}  // namespace
}  // namespace resilient::profiler::abi

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v5_t, ncclProfilerEventStateArgs_v5_t>() ==
              abi::Features{
                  .exactChannels = true, .kernelCh = true, .gpuTimes = true, .netPlugin = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = {
    abi::kPluginName,
    abi::init,
    abi::startEvent<ncclProfilerEventDescr_v5_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v5_t>,
    abi::finalizeContext,
};
