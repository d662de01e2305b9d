// ncclProfiler_v4 (NCCL 2.27.3+): init gets the communicator's identity
// (commHash 4th); Coll/P2p carry the real channel count; KernelCh has GPU
// timestamps. Coll/P2p's parent is the legacy Group (passive for us).
#include "nccl/profiler_v4.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace resilient::profiler::abi {
namespace {

ncclResult_t init(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  return initIdentified(4, context, eActivationMask, commHash, commName, nNodes, nranks, rank,
                        logfn);
}

}  // namespace
}  // namespace resilient::profiler::abi

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v4_t, ncclProfilerEventStateArgs_v4_t>() ==
              abi::Features{
                  .exactChannels = true, .kernelCh = true, .gpuTimes = true, .netPlugin = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v4_t ncclProfiler_v4 = {
    abi::kPluginName,
    abi::init,
    abi::startEvent<ncclProfilerEventDescr_v4_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v4_t>,
    abi::finalizeContext,
};
