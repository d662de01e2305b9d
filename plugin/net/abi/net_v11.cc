// ncclNetPlugin_v11 (NCCL 2.28.3+): per-communicator contexts; NCCL calls the
// struct's pointers directly.
#include "nccl/net_v11.h"

#include "plugin/net/abi/context_calls.h"

// Not const: init sets the optional members (optional_calls.h).
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 =
    resilient::abi::context::table<ncclNet_v11_t, ncclNetProperties_v11_t>();
}  // extern "C"
