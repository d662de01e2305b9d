// ncclCollNetPlugin_v9 (size_t counts and pieces, makeVDevice).
#include "nccl/collnet_v9.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v9_t ncclCollNetPlugin_v9 =
    resilient::abi::collnet::table<ncclCollNet_v9_t>();
}  // extern "C"
