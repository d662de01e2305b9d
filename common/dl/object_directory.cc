#include "common/dl/object_directory.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace resilient::dl {

std::string objectDirectory(const void* symbol) {
  Dl_info info{};
  if (::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).parent_path().string()
            : self.parent_path().string();
}

}  // namespace resilient::dl
