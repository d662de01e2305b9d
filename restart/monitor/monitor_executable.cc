#include "restart/monitor/monitor_executable.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/dl/object_directory.h"
#include "resilient/restart/errors.hpp"

namespace resilient::restart::monitor {

namespace {

bool executable(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// `name` in the directories of PATH; "" when absent.
std::string onPath(const std::string& name, std::vector<std::string>* tried) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', pos), dirs.size());
    const std::string dir = dirs.substr(pos, end - pos);
    pos = end + 1;
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable(candidate)) {
      return candidate;
    }
  }
  tried->push_back("PATH (" + dirs + ")");
  return {};
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) {
    s += (s.empty() ? "" : ", ") + i;
  }
  return s;
}

}  // namespace

std::string findMonitorExecutable(const std::string& given) {
  std::vector<std::string> tried;
  if (!given.empty()) {
    if (given.find('/') != std::string::npos) {
      if (executable(given)) {
        return given;
      }
      throw RestartError("the monitor executable " + given + " is missing or not executable");
    }
    std::string found = onPath(given, &tried);
    if (!found.empty()) {
      return found;
    }
    throw RestartError("the monitor executable " + given + " is not on " + join(tried));
  }
  // Where an installation puts it: beside the library, or in ../bin or
  // ../libexec (the build tree links it beside the library too).
  const std::filesystem::path dir =
      dl::objectDirectory(reinterpret_cast<const void*>(&findMonitorExecutable));
  if (!dir.empty()) {
    for (const char* sub : {".", "../bin", "../libexec"}) {
      const std::string candidate =
          (dir / sub / kMonitorExecutableName).lexically_normal().string();
      if (executable(candidate)) {
        return candidate;
      }
      tried.push_back(candidate);
    }
  }
  std::string found = onPath(kMonitorExecutableName, &tried);
  if (!found.empty()) {
    return found;
  }
  throw RestartError(std::string("cannot find ") + kMonitorExecutableName + " (looked at " +
                     join(tried) + "); set the monitor executable in the restart options");
}

}  // namespace resilient::restart::monitor
