// ncclCollNetPlugin_v11 (per-communicator contexts and finalize; NCCL 2.28/2.29 call it directly).
#include "nccl/collnet_v11.h"

#include "plugin/net/abi/collnet_calls.h"

// Not const: init sets the optional members (collnet_calls.h, offer).
extern "C" {
__attribute__((visibility("default"))) ncclCollNet_v11_t ncclCollNetPlugin_v11 =
    resilient::abi::collnet::table<ncclCollNet_v11_t>();
}  // extern "C"
