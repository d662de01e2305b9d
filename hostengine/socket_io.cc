#include "hostengine/socket_io.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/clock.h"

namespace resilient::hostengine {
namespace {

int pollMs(uint64_t deadlineNs) {
  const uint64_t now = monotonicNs();
  if (now >= deadlineNs) {
    return 0;
  }
  return static_cast<int>(std::min<uint64_t>((deadlineNs - now) / 1000000 + 1, 1000));
}

// Waits until `fd` has `events` or the deadline passes; false on timeout.
Result<bool> waitFor(int fd, short events, uint64_t deadlineNs) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int timeout = pollMs(deadlineNs);
    if (timeout == 0) {
      return false;
    }
    const int n = ::poll(&p, 1, timeout);
    if (n > 0) {
      return true;
    }
    if (n < 0 && errno != EINTR) {
      return systemError("poll");
    }
  }
}

}  // namespace

Status setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return systemError("fcntl(O_NONBLOCK)");
  }
  return {};
}

Status setNoDelay(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return systemError("setsockopt(TCP_NODELAY)");
  }
  return {};
}

Status setBufferBytes(int fd, int bytes) {
  if (bytes <= 0) {
    return {};
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) != 0) {
    return systemError("setsockopt(SO_SNDBUF/SO_RCVBUF)");
  }
  return {};
}

Result<FileDescriptor> listenOn(const std::string& host, uint16_t port, int backlog) {
  Result<SocketAddress> address = resolveAddress(host, port);
  if (!address.ok()) {
    return address.status();
  }
  FileDescriptor fd(::socket(address->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return systemError("socket");
  }
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), address->get(), address->length) != 0) {
    return systemError("bind to " + address->toString());
  }
  if (::listen(fd.get(), backlog) != 0) {
    return systemError("listen on " + address->toString());
  }
  return fd;
}

Result<FileDescriptor> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs) {
  int lastErrno = 0;
  do {
    FileDescriptor fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      return systemError("socket");
    }
    int rc = ::connect(fd.get(), address.get(), address.length);
    if (rc != 0 && errno == EINPROGRESS) {
      Result<bool> ready = waitFor(fd.get(), POLLOUT, deadlineNs);
      if (!ready.ok()) {
        return ready.status();
      }
      if (!*ready) {
        break;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      return fd;
    }
    lastErrno = errno;
    if (lastErrno != ECONNREFUSED && lastErrno != ECONNRESET && lastErrno != ETIMEDOUT &&
        lastErrno != EAGAIN) {
      return systemError("connect to " + address.toString(), lastErrno);
    }
    ::usleep(10000);
  } while (monotonicNs() < deadlineNs);
  return timeoutError(
      "no connection to " + address.toString() + " before the deadline" +
          (lastErrno != 0 ? std::string(" (last error: ") + std::to_string(lastErrno) + ")"
                          : std::string()),
      address.toString());
}

Status sendAll(int fd, const void* data, size_t bytes, uint64_t deadlineNs, const char* what) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Result<bool> ready = waitFor(fd, POLLOUT, deadlineNs);
      if (!ready.ok()) {
        return ready.status();
      }
      if (!*ready) {
        return timeoutError(std::string("timed out sending ") + what);
      }
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) {
      return remoteError(std::string("connection lost sending ") + what, {}, errno);
    }
    return systemError(std::string("send ") + what);
  }
  return {};
}

Status recvAll(int fd, void* data, size_t bytes, uint64_t deadlineNs, const char* what) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return remoteError(std::string("connection closed by the peer while receiving ") + what);
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Result<bool> ready = waitFor(fd, POLLIN, deadlineNs);
      if (!ready.ok()) {
        return ready.status();
      }
      if (!*ready) {
        return timeoutError(std::string("timed out receiving ") + what);
      }
      continue;
    }
    if (errno == ECONNRESET) {
      return remoteError(std::string("connection reset while receiving ") + what, {}, errno);
    }
    return systemError(std::string("recv ") + what);
  }
  return {};
}

}  // namespace resilient::hostengine
