// ncclCollNetPlugin_v8 (AllGather/ReduceScatter (uint32_t pieces), size_t regMr, int count).
#include "nccl/collnet_v8.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v8_t ncclCollNetPlugin_v8 =
    resilient::abi::collnet::table<ncclCollNet_v8_t>();
}  // extern "C"
