// ncclCollNetPlugin_v6 (NCCL 2.12+: int counts and regMr sizes, no AllGather/ReduceScatter).
#include "nccl/collnet_v6.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v6_t ncclCollNetPlugin_v6 =
    resilient::abi::collnet::table<ncclCollNet_v6_t>();
}  // extern "C"
