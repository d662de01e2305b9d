// The stand-in CUDA runtime's driver API: the CUDA driver entry points that a
// net plugin resolves through cudaGetDriverEntryPoint[ByVersion], implemented
// with host memory semantics for a machine without a GPU (one device, no GDR,
// no DMA-BUF, no virtual memory management). Called from whatever thread the
// plugin calls from (NCCL's main thread at init, proxy threads after).
#pragma once

#include <string_view>

namespace resilient::cudart_standin {

// The entry point named `name` (e.g. "cuMemAlloc"), or nullptr when the
// stand-in does not provide it.
void* driverEntryPoint(std::string_view name);

}  // namespace resilient::cudart_standin
