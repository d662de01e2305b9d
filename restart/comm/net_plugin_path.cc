#include "restart/comm/net_plugin_path.h"

#include <filesystem>
#include <system_error>

#include "common/dl/object_directory.h"

namespace resilient::restart::comm {

std::string defaultNetPlugin() {
  // Installed beside the library (the build tree links it there too); never
  // a path of the build that made the library.
  const std::string dir = dl::objectDirectory(reinterpret_cast<const void*>(&defaultNetPlugin));
  if (!dir.empty()) {
    const std::string beside = dir + "/" + kNetPluginFile;
    std::error_code ec;
    if (std::filesystem::is_regular_file(beside, ec)) {
      return beside;
    }
  }
  return kNetPluginFile;
}

}  // namespace resilient::restart::comm
