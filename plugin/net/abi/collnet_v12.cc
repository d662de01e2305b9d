// ncclCollNetPlugin_v12 (as v11 with v12 types (NCCL 2.30)).
#include "nccl/collnet_v12.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v12_t ncclCollNetPlugin_v12 =
    resilient::abi::collnet::table<ncclCollNet_v12_t>();
}  // extern "C"
