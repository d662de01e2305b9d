// The transport a host-engine tool runs on: a net plugin loaded as NCCL
// loads it (newest ABI first; loading ourselves is allowed, since the tools
// are not a plugin), or our raw TCP pump, the physical baseline.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "hostengine/raw_tcp_transport.h"
#include "plugin/transport/transport.h"

namespace resilient::hostengine {

// A net plugin loaded as NCCL loads it, with what the callers report of it.
struct LoadedPlugin {
  std::unique_ptr<transport::Transport> transport;
  std::string libraryPath;  // the file the loader opened
  int abiVersion = 0;       // the ncclNetPlugin_vN it was driven through
};

// `spec`: a path, a library name or a plugin name (as NCCL_NET_PLUGIN). A
// plugin that does not load is an error naming it.
Result<LoadedPlugin> loadPlugin(const std::string& spec);

// `plugin`: a path, a library name or a plugin name; nullopt: the raw pump
// with `raw`. A plugin that does not load is an error naming it.
Result<std::unique_ptr<transport::Transport>> openTransport(
    const std::optional<std::string>& plugin, const RawTcpOptions& raw);

}  // namespace resilient::hostengine
