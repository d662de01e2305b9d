#include "tools/harness/transport_choice.h"

#include "hostengine/loaded_plugin.h"

namespace resilient::harness {

Result<std::unique_ptr<transport::Transport>> openTransport(
    const std::optional<std::string>& plugin, const transport::raw::RawTcpOptions& raw) {
  if (!plugin) {
    return std::unique_ptr<transport::Transport>(
        std::make_unique<transport::raw::RawTcpTransport>(raw));
  }
  auto loaded = hostengine::loadPlugin(*plugin);
  if (!loaded.ok()) {
    return loaded.status();
  }
  return std::move(std::move(loaded).value().transport);
}

}  // namespace resilient::harness
