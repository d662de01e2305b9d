#include "common/conf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <unordered_set>

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
      diag("ignored line without '=': \"" + std::string(body) + "\"");
      continue;
    }
    const std::string_view name = trim(body.substr(0, eq));
    const std::string_view value = trim(body.substr(eq + 1));
    if (!validName(name)) {
      diag("ignored line with an invalid variable name: \"" + std::string(body) + "\"");
      continue;
    }
    if (name.size() > kMaxConfTokenLength || value.size() > kMaxConfTokenLength) {
      diag("ignored " + std::string(name) + ": name or value longer than " +
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
  auto unreadable = [&](int err) {
    ConfFile file;
    file.path = path;
    file.diagnostics.push_back(path + ": cannot read: " + errnoText(err));
    return file;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return std::nullopt;
    }
    return unreadable(errno);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    return unreadable(err);
  }
  std::string content;
  std::array<char, 4096> chunk{};
  while (true) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return unreadable(err);
    }
    if (n == 0) {
      break;
    }
    content.append(chunk.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return parseConf(content, path);
}

}  // namespace resilient::config
