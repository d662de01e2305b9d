// What of the inner plugin's library the wrapper does not pass through, said
// once when the library is loaded: NCCL looks up other plugin kinds in the
// net plugin's library, and those of the inner library are then ours to
// offer (docs/net-plugin.md, "Capabilities passed through").
//
// GIN (GPU-initiated networking, the device API's ncclGin) is one: the
// wrapper exports no ncclGinPlugin_vN. What NCCL does without it
// (src/plugin/net.cc ncclNetPluginLoad at 2.28; src/plugin/gin.cc ncclGinInit
// at 2.29 and 2.30): NCCL 2.28 looks for ncclGinPlugin_v11 only in the net
// plugin's library and has no fallback for an external net plugin, so
// multi-node device-API communicators fail ("GIN not supported"); 2.29 and
// 2.30 look in NCCL_GIN_PLUGIN (or libnccl-gin.so), then in the net plugin's
// library, then fall back to NCCL's own InfiniBand GIN, so naming the inner
// library in NCCL_GIN_PLUGIN gives the user its GIN back (2.30 also loads
// RMA, ncclRmaPlugin_vN, from NCCL_RMA_PLUGIN, the GIN library or the net
// library). GIN traffic never crosses the net plugin: the wrapper sees none
// of it either way.
#pragma once

#include "plugin/transport/external/external_transport.h"

namespace resilient::net {

// One WARN naming each plugin kind the inner library exports that the
// wrapper does not pass through (GIN, RMA), with the user's way to get it;
// nothing when there is none.
void noteNotWrapped(const transport::external::ExternalTransport& inner);

}  // namespace resilient::net
