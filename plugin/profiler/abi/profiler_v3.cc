// ncclProfiler_v3 (NCCL 2.26.2+): init knows only the mask, so the
// communicator's hash and our rank come from the first Coll/P2p descriptor.
// KernelCh events exist (without timestamps); nMaxChannels is an upper bound,
// so an operation completes when its last child event stops.
#include "nccl/profiler_v3.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v3_t, ncclProfilerEventStateArgs_v3_t>() ==
              abi::Features{.commHash = true, .kernelCh = true, .netPlugin = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v3_t ncclProfiler_v3 = {
    abi::kPluginName,
    abi::initMaskOnly<3>,
    abi::startEvent<ncclProfilerEventDescr_v3_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v3_t>,
    abi::finalizeContext,
};
