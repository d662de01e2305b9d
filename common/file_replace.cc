#include "common/file_replace.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "common/file_descriptor.h"

namespace resilient {

Status replaceFile(const std::string& path, std::string_view bytes, mode_t mode) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) {
    return systemError("cannot create " + tmp);
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      Status s = systemError("cannot write " + tmp);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd.release()) != 0) {
    Status s = systemError("cannot write " + tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = systemError("cannot rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  return {};
}

}  // namespace resilient
