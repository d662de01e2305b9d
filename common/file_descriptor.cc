#include "common/file_descriptor.h"

#include <unistd.h>

namespace resilient {

void FileDescriptor::reset(int fd) noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

}  // namespace resilient
