#include "blackbox/region_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace resilient::blackbox {
namespace {

// What the file open as `fd` is, when it is not a regular file.
Status checkRegular(const std::string& path, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return systemError("blackbox: cannot stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalidUsage("blackbox: " + path + " is not a regular file (refused)");
  }
  return {};
}

Status openError(const std::string& path, int err) {
  if (err == ELOOP) {
    return invalidUsage("blackbox: " + path +
                        " is a symbolic link (refused: links are not followed)");
  }
  errno = err;
  return systemError("blackbox: cannot open " + path);
}

}  // namespace

Result<FileDescriptor> openRegionFile(const std::string& path, bool writable) {
  FileDescriptor fd(
      ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return openError(path, errno);
  }
  RESILIENT_TRY(checkRegular(path, fd.get()));
  return fd;
}

Result<FileDescriptor> createOrOpenOwnRegion(const std::string& path, bool* created) {
  FileDescriptor fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  *created = fd.valid();
  if (fd.valid()) {
    return fd;
  }
  if (errno != EEXIST) {
    return openError(path, errno);
  }
  fd.reset(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return openError(path, errno);
  }
  RESILIENT_TRY(checkRegular(path, fd.get()));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return systemError("blackbox: cannot stat " + path);
  }
  if (st.st_uid != geteuid()) {
    return invalidUsage("blackbox: " + path + " belongs to uid " + std::to_string(st.st_uid) +
                        ", not to this process's uid " + std::to_string(geteuid()) + " (refused)");
  }
  if (st.st_nlink != 1) {
    return invalidUsage("blackbox: " + path + " has " + std::to_string(st.st_nlink) +
                        " links (refused: it may be another file's)");
  }
  return fd;
}

bool stillNamed(const std::string& path, int fd) {
  struct stat named {};
  struct stat open {};
  return lstat(path.c_str(), &named) == 0 && fstat(fd, &open) == 0 && named.st_dev == open.st_dev &&
         named.st_ino == open.st_ino;
}

}  // namespace resilient::blackbox
