// ncclProfiler_v1 (NCCL 2.23): like v2, but function, datatype, algorithm
// and protocol are numeric codes (ncclFunc_t, ncclDataType_t, NCCL_ALGO_*,
// NCCL_PROTO_*), turned into NCCL's own strings (descriptor.h).
#include "nccl/profiler_v1.h"

#include "plugin/profiler/abi/adapter.h"
#include "plugin/profiler/abi/descriptor.h"
#include "plugin/profiler/abi/features.h"

namespace abi = resilient::profiler::abi;

static_assert(abi::featuresOf<ncclProfilerEventDescr_v1_t, ncclProfilerEventStateArgs_v1_t>() ==
              abi::Features{.stringNames = false, .commHash = true, .trafficBytes = true});

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v1_t ncclProfiler_v1 = {
    abi::kPluginName,
    abi::initMaskOnly<1>,
    abi::startEvent<ncclProfilerEventDescr_v1_t>,
    abi::stopEvent,
    abi::recordEventState<ncclProfilerEventStateArgs_v1_t>,
    abi::finalizeContext,
};
