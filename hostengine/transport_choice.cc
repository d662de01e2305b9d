#include "hostengine/transport_choice.h"

#include "hostengine/plugin_log.h"
#include "plugin/transport/external/loader.h"

namespace resilient::hostengine {

Result<std::unique_ptr<transport::Transport>> openTransport(
    const std::optional<std::string>& plugin, const RawTcpOptions& raw) {
  if (!plugin) {
    return std::unique_ptr<transport::Transport>(std::make_unique<RawTcpTransport>(raw));
  }
  transport::external::LoadOptions load;
  load.spec = *plugin;
  load.refuseSelf = false;
  load.logger = pluginLogger();
  auto loaded = transport::external::loadExternalPlugin(load);
  if (!loaded.ok()) {
    return loaded.status();
  }
  return std::unique_ptr<transport::Transport>(std::move(loaded).value());
}

}  // namespace resilient::hostengine
