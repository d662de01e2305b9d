// A net plugin loaded as NCCL loads it (newest ABI first; loading ourselves
// is allowed, since the host engine's users are not a plugin): what the host
// communicator and the tools run the engine on.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
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

}  // namespace resilient::hostengine
