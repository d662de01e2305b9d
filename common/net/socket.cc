#include "common/net/socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/clock.h"

namespace resilient {
namespace {

Status setIntOption(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) {
    return systemError(std::string("setsockopt(") + what + ")");
  }
  return {};
}

// Milliseconds until `deadlineNs`, rounded up (0 once it has passed).
int msUntil(uint64_t deadlineNs) {
  const uint64_t now = monotonicNs();
  if (now >= deadlineNs) {
    return 0;
  }
  return static_cast<int>(std::min<uint64_t>((deadlineNs - now + 999999) / 1000000, 1 << 30));
}

// Waits for `events` on a socket that would block: 0 when ready, ETIMEDOUT
// at the deadline, or the errno of poll.
int waitOrTimeout(int fd, short events, uint64_t deadlineNs) {
  Result<bool> ready = waitReadyBefore(fd, events, deadlineNs);
  if (!ready.ok()) {
    return ready.status().sysErrno() != 0 ? ready.status().sysErrno() : EIO;
  }
  return *ready ? 0 : ETIMEDOUT;
}

Status deadlineStatus(int err, uint64_t deadlineNs, const std::string& doing,
                      const std::string& what) {
  if (err == ETIMEDOUT && monotonicNs() >= deadlineNs) {
    return timeoutError("timed out " + doing + " " + what);
  }
  return connectionError(err, doing + " " + what);
}

}  // namespace

Result<FileDescriptor> openStreamSocket(int family) {
  FileDescriptor fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd.valid()) {
    return systemError("socket");
  }
  return fd;
}

Result<FileDescriptor> listenOn(const SocketAddress& address, const ListenOptions& options) {
  Result<FileDescriptor> fd = openStreamSocket(address.family());
  if (!fd.ok()) {
    return fd.status();
  }
  if (options.reuseAddress) {
    RESILIENT_TRY(setIntOption(fd->get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  }
  if (::bind(fd->get(), address.get(), address.length) != 0) {
    return systemError("bind to " + address.toString());
  }
  if (::listen(fd->get(), options.backlog) != 0) {
    return systemError("listen on " + address.toString());
  }
  return fd;
}

Result<FileDescriptor> listenOn(const std::string& host, uint16_t port,
                                const ListenOptions& options) {
  Result<SocketAddress> address = resolveAddress(host, port);
  if (!address.ok()) {
    return address.status();
  }
  return listenOn(*address, options);
}

FileDescriptor acceptConnection(int listenFd, SocketAddress* peer) noexcept {
  for (;;) {
    SocketAddress from;
    from.length = sizeof from.storage;
    const int fd = ::accept4(listenFd, from.get(), &from.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) {
      continue;
    }
    if (fd >= 0 && peer != nullptr) {
      *peer = from;
    }
    return FileDescriptor(fd);
  }
}

Status applySocketOptions(int fd, const SocketOptions& options) {
  if (options.noDelay) {
    RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  }
  if (options.userTimeoutMs > 0) {
    RESILIENT_TRY(
        setIntOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, options.userTimeoutMs, "TCP_USER_TIMEOUT"));
  }
  if (options.keepAlive.idleS > 0) {
    RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
    RESILIENT_TRY(
        setIntOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, options.keepAlive.idleS, "TCP_KEEPIDLE"));
    RESILIENT_TRY(
        setIntOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, options.keepAlive.intervalS, "TCP_KEEPINTVL"));
    RESILIENT_TRY(
        setIntOption(fd, IPPROTO_TCP, TCP_KEEPCNT, options.keepAlive.count, "TCP_KEEPCNT"));
  }
  if (options.bufferBytes > 0) {
    RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_SNDBUF, options.bufferBytes, "SO_SNDBUF"));
    RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_RCVBUF, options.bufferBytes, "SO_RCVBUF"));
  }
  return {};
}

Status setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return systemError("fcntl(O_NONBLOCK)");
  }
  return {};
}

void setQuickAck(int fd, bool on) noexcept {
  const int value = on ? 1 : 0;
  ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &value, sizeof value);
}

int startConnect(int fd, const SocketAddress& address) noexcept {
  if (::connect(fd, address.get(), address.length) == 0) {
    return 0;
  }
  return errno;
}

int pendingSocketError(int fd) noexcept {
  int err = 0;
  socklen_t length = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &length) != 0) {
    return errno;
  }
  return err;
}

int connectBefore(const SocketAddress& address, uint64_t deadlineNs, FileDescriptor* out) {
  Result<FileDescriptor> fd = openStreamSocket(address.family());
  if (!fd.ok()) {
    return fd.status().sysErrno() != 0 ? fd.status().sysErrno() : EIO;
  }
  int err = startConnect(fd->get(), address);
  if (err == EINPROGRESS) {
    err = waitOrTimeout(fd->get(), POLLOUT, deadlineNs);
    if (err == 0) {
      err = pendingSocketError(fd->get());
    }
  }
  if (err == 0) {
    *out = std::move(*fd);
  }
  return err;
}

Result<FileDescriptor> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs) {
  int lastErrno = 0;
  do {
    FileDescriptor fd;
    lastErrno = connectBefore(address, deadlineNs, &fd);
    if (lastErrno == 0) {
      return fd;
    }
    if (lastErrno != ECONNREFUSED && lastErrno != ECONNRESET && lastErrno != ETIMEDOUT &&
        lastErrno != EAGAIN) {
      return systemError("connect to " + address.toString(), lastErrno);
    }
    ::usleep(10000);
  } while (monotonicNs() < deadlineNs);
  return timeoutError("no connection to " + address.toString() +
                          " before the deadline (last error: " + errnoText(lastErrno) + ")",
                      address.toString());
}

Result<bool> waitReady(int fd, short events, int timeoutMs) {
  if (timeoutMs < 0) {
    for (;;) {
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, -1);
      if (n > 0) {
        return true;
      }
      if (n < 0 && errno != EINTR) {
        return systemError("poll");
      }
    }
  }
  return waitReadyBefore(fd, events, monotonicNs() + static_cast<uint64_t>(timeoutMs) * 1000000);
}

Result<bool> waitReadyBefore(int fd, short events, uint64_t deadlineNs) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, msUntil(deadlineNs));
    if (n > 0) {
      return true;
    }
    if (n == 0 && monotonicNs() >= deadlineNs) {
      return false;
    }
    if (n < 0 && errno != EINTR) {
      return systemError("poll");
    }
  }
}

int sendExact(int fd, const void* data, size_t bytes, uint64_t deadlineNs, size_t* done) {
  const auto* p = static_cast<const char*>(data);
  size_t sent = 0;
  int err = 0;
  while (sent < bytes) {
    const ssize_t n = ::send(fd, p + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      err = waitOrTimeout(fd, POLLOUT, deadlineNs);
      if (err != 0) {
        break;
      }
      continue;
    }
    err = n < 0 ? errno : EPIPE;
    break;
  }
  if (done != nullptr) {
    *done = sent;
  }
  return err;
}

int recvExact(int fd, void* data, size_t bytes, uint64_t deadlineNs, size_t* done) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  int err = 0;
  while (got < bytes) {
    const ssize_t n = ::recv(fd, p + got, bytes - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      err = ECONNRESET;
      break;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      err = waitOrTimeout(fd, POLLIN, deadlineNs);
      if (err != 0) {
        break;
      }
      continue;
    }
    err = errno;
    break;
  }
  if (done != nullptr) {
    *done = got;
  }
  return err;
}

Status sendAll(int fd, const void* data, size_t bytes, uint64_t deadlineNs,
               const std::string& what) {
  const int err = sendExact(fd, data, bytes, deadlineNs);
  return err == 0 ? Status() : deadlineStatus(err, deadlineNs, "sending", what);
}

Status recvAll(int fd, void* data, size_t bytes, uint64_t deadlineNs, const std::string& what) {
  const int err = recvExact(fd, data, bytes, deadlineNs);
  return err == 0 ? Status() : deadlineStatus(err, deadlineNs, "receiving", what);
}

Status connectionError(int err, const std::string& what, const std::string& peer) {
  switch (err) {
    case 0: return remoteError("connection closed by the peer during " + what, peer);
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case ECONNREFUSED: return remoteError("connection failed during " + what, peer, err);
    default: return systemError(what + " failed", err, peer);
  }
}

}  // namespace resilient
