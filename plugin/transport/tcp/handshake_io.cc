#include "plugin/transport/tcp/handshake_io.h"

#include <sys/socket.h>

#include <cerrno>

namespace resilient::transport::tcp {

IoStep receiveStep(int fd, uint8_t* buf, size_t size, size_t* done, int* err) noexcept {
  while (*done < size) {
    const ssize_t n = ::recv(fd, buf + *done, size - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return IoStep::kClosed;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return IoStep::kPending;
    }
    *err = errno;
    return IoStep::kFailed;
  }
  return IoStep::kComplete;
}

IoStep sendStep(int fd, const uint8_t* buf, size_t size, size_t* done, int* err) noexcept {
  while (*done < size) {
    const ssize_t n = ::send(fd, buf + *done, size - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
      return IoStep::kPending;
    }
    if (errno == EINTR) {
      continue;
    }
    *err = errno;
    return IoStep::kFailed;
  }
  return IoStep::kComplete;
}

}  // namespace resilient::transport::tcp
