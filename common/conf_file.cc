#include "common/conf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <unordered_set>

#include "common/file_descriptor.h"
#include "common/log.h"
#include "common/status.h"

namespace resilient::config {
namespace {

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) {
    return {};
  }
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool validName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
    return false;
  }
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return false;
    }
  }
  return true;
}

}  // namespace

ConfFile parseConf(std::string_view text, std::string path) {
  ConfFile file;
  file.path = std::move(path);
  std::unordered_set<std::string> seen;
  int lineNo = 0;
  while (!text.empty()) {
    ++lineNo;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    const std::string_view body = trim(line);
    if (body.empty() || body.front() == '#') {
      continue;
    }
    auto diag = [&](const std::string& why) {
      file.diagnostics.push_back(file.path + ":" + std::to_string(lineNo) + ": " + why);
    };
    const size_t eq = body.find('=');
    if (eq == std::string_view::npos) {
      diag("ignored line without '=': \"" + log::printable(body) + "\"");
      continue;
    }
    const std::string_view name = trim(body.substr(0, eq));
    const std::string_view value = trim(body.substr(eq + 1));
    if (!validName(name)) {
      diag("ignored line with an invalid variable name: \"" + log::printable(body) + "\"");
      continue;
    }
    if (name.size() > kMaxConfTokenLength || value.size() > kMaxConfTokenLength) {
      diag("ignored " + log::printable(name) + ": name or value longer than " +
           std::to_string(kMaxConfTokenLength) + " characters");
      continue;
    }
    if (!seen.emplace(name).second) {
      continue;  // first occurrence wins, as in NCCL
    }
    file.entries.push_back(ConfEntry{std::string(name), std::string(value), lineNo});
  }
  return file;
}

std::optional<ConfFile> readConf(const std::string& path) {
  auto refused = [&](const std::string& why) {
    ConfFile file;
    file.path = path;
    file.diagnostics.push_back(path + ": " + why);
    return file;
  };
  // Never blocks: a FIFO at the name is refused, not waited on.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return std::nullopt;
    }
    return refused("cannot read: " + errnoText(errno));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return refused("cannot read: " + errnoText(errno));
  }
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
    return parseConf("", path);  // /dev/null: an empty configuration
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return refused(std::string("not a regular file (") + kind + "): ignored");
  }
  if (st.st_size > static_cast<off_t>(kMaxConfFileBytes)) {
    return refused("larger than " + std::to_string(kMaxConfFileBytes) + " bytes: ignored");
  }
  std::string content;
  std::array<char, 4096> chunk{};
  while (content.size() <= kMaxConfFileBytes) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return refused("cannot read: " + errnoText(errno));
    }
    if (n == 0) {
      break;
    }
    content.append(chunk.data(), static_cast<size_t>(n));
  }
  return parseConf(content, path);
}

}  // namespace resilient::config
