// ncclProfiler_v2 (NCCL 2.24+): like v3 without KernelCh and NetPlugin
// events, so proxy ops are the only sign that an operation runs (an
// operation that needs no network is seen enqueued, never started). Coll
// carries trafficBytes.
#include "nccl/profiler_v2.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v2_t, ncclProfilerEventStateArgs_v2_t>() ==
              abi::Features{.commHash = true, .trafficBytes = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v2_t ncclProfiler_v2 = {
    abi::kPluginName,
    abi::initMaskOnly<2>,
    abi::startEvent<ncclProfilerEventDescr_v2_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v2_t>,
    abi::finalizeContext,
};
