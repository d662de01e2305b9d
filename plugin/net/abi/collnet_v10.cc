// ncclCollNetPlugin_v10 (as v9 with v10 types).
#include "nccl/collnet_v10.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v10_t ncclCollNetPlugin_v10 =
    resilient::abi::collnet::table<ncclCollNet_v10_t>();
}  // extern "C"
