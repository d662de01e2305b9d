#include "restart/comm/net_plugin_path.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace resilient::restart::comm {
namespace {

// The directory of the shared object (or executable) holding this code.
std::string ownDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&ownDirectory), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::string() : self.parent_path().string();
}

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
  const std::string dir = ownDirectory();
  if (!dir.empty()) {
    add(dir + "/" + kNetPluginFile);
  }
#ifdef RESILIENT_NET_PLUGIN_BUILD_PATH
  add(RESILIENT_NET_PLUGIN_BUILD_PATH);
#endif
#ifdef RESILIENT_NET_PLUGIN_INSTALL_PATH
  add(RESILIENT_NET_PLUGIN_INSTALL_PATH);
#endif
  return out;
}

std::string defaultNetPlugin() {
  std::vector<std::string> candidates = netPluginCandidates();
  return candidates.empty() ? std::string(kNetPluginFile) : candidates.front();
}

}  // namespace resilient::restart::comm
