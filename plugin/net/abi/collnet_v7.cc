// ncclCollNetPlugin_v7 (as v6 with v7 properties).
#include "nccl/collnet_v7.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v7_t ncclCollNetPlugin_v7 =
    resilient::abi::collnet::table<ncclCollNet_v7_t>();
}  // extern "C"
