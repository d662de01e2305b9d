#include "hostengine/loaded_plugin.h"

#include "hostengine/plugin_log.h"
#include "plugin/transport/external/loader.h"

namespace resilient::hostengine {

Result<LoadedPlugin> loadPlugin(const std::string& spec) {
  transport::external::LoadOptions load;
  load.spec = spec;
  load.refuseSelf = false;  // the tools and the host communicator are not a plugin
  load.logger = pluginLogger();
  auto loaded = transport::external::loadExternalPlugin(load);
  if (!loaded.ok()) {
    return loaded.status();
  }
  LoadedPlugin out;
  out.libraryPath = loaded.value()->libraryPath();
  out.abiVersion = loaded.value()->abiVersion();
  out.transport = std::move(loaded).value();
  return out;
}

}  // namespace resilient::hostengine
