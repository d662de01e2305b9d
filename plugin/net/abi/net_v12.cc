// ncclNetPlugin_v12 (NCCL 2.30): v11's calls with the v12 properties (8 fused
// devices, railId and planeId); NCCL calls the struct's pointers directly.
#include "nccl/net_v12.h"

#include "plugin/net/abi/context_calls.h"

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12 =
    resilient::abi::context::table<ncclNet_v12_t, ncclNetProperties_v12_t>();
}  // extern "C"
