#include "restart/comm/net_plugin_path.h"

#include <filesystem>
#include <system_error>

#include "common/dl/object_directory.h"

namespace resilient::restart::comm {
namespace {

bool isFile(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(path, ec);
}

}  // namespace

std::vector<std::string> netPluginCandidates() {
  std::vector<std::string> out;
  auto add = [&out](const std::string& path) {
    if (isFile(path)) {
      out.push_back(path);
    }
  };
  // Installed beside the library (the build tree links it there too); never
  // a path of the build that made the library.
  const std::string dir = dl::objectDirectory(reinterpret_cast<const void*>(&netPluginCandidates));
  if (!dir.empty()) {
    add(dir + "/" + kNetPluginFile);
  }
  return out;
}

std::string defaultNetPlugin() {
  std::vector<std::string> candidates = netPluginCandidates();
  return candidates.empty() ? std::string(kNetPluginFile) : candidates.front();
}

}  // namespace resilient::restart::comm
