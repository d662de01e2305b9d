// The external CollNet: the ncclCollNetPlugin_vN of the inner net plugin's
// library (NCCL looks it up in the same dlopen'ed library as the net, newest
// first, whatever the net's version: src/plugin/net.cc, ncclNetPluginLoad).
//
// One shim per ABI version (external_collnet.cc, CollShim<ncclCollNet_vN_t>)
// maps that version's calls onto collnet.h's typed seam, the way NCCL's
// src/plugin/net/net_vN.cc adapt an old CollNet: init once per process up to
// v10 (ncclCollNet_init's refCount), int sizes refused above INT_MAX (v6-v8
// count, v6/v7 regMr), v8's AllGather/ReduceScatter limited to one piece of
// at most 512 MiB (NCCL_COLLNET_LEGACY_MAX_SIZE). The plugin's own pointers
// (context, listen comm, comm, requests, mhandles) stay inside the objects
// made here. Errors are whatever the plugin returns, named by plugin,
// version and call (pluginStatus); stickiness is the resilient layer's.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "nccl/log.h"
#include "plugin/transport/collnet.h"

namespace resilient::transport::external {

// The symbols looked up, newest first ("ncclCollNetPlugin_v12" ... "_v6").
inline constexpr const char* kCollNetSymbols[] = {"ncclCollNetPlugin_v12", "ncclCollNetPlugin_v11",
                                                  "ncclCollNetPlugin_v10", "ncclCollNetPlugin_v9",
                                                  "ncclCollNetPlugin_v8",  "ncclCollNetPlugin_v7",
                                                  "ncclCollNetPlugin_v6"};

// The CollNet of the dlopen'ed `library` (kept open by the caller for the
// CollNet's lifetime), of the newest version <= maxVersion it exports; an
// empty pointer when it exports none (no CollNet: not an error, as in
// NCCL). A struct without init is refused (invalidUsage).
Result<std::unique_ptr<CollNet>> loadExternalCollNet(void* library, int maxVersion,
                                                     ncclDebugLogger_t logger,
                                                     const std::string& path);

// N of the ncclCollNetPlugin_vN an external CollNet drives (0: not external).
int collNetAbiVersion(const CollNet& collNet) noexcept;

}  // namespace resilient::transport::external
