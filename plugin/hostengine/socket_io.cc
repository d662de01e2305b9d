#include "plugin/hostengine/net_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

uint64_t monotonicNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Fd::reset(int fd) noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

Result<SocketAddress> resolveAddress(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0 || list == nullptr) {
    return invalidUsage("cannot resolve address '" + host + "': " + gai_strerror(rc));
  }
  SocketAddress out;
  std::memcpy(&out.storage, list->ai_addr, list->ai_addrlen);
  out.length = list->ai_addrlen;
  ::freeaddrinfo(list);
  return out;
}

std::string addressText(const SocketAddress& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address.storage.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (address.storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

uint16_t addressPort(const SocketAddress& address) noexcept {
  if (address.storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_port);
  }
  if (address.storage.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_port);
  }
  return 0;
}

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

Result<Fd> listenOn(const std::string& host, uint16_t port, int backlog) {
  Result<SocketAddress> address = resolveAddress(host, port);
  if (!address.ok()) {
    return address.status();
  }
  Fd fd(::socket(address->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return systemError("socket");
  }
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address->storage), address->length) !=
      0) {
    return systemError("bind to " + addressText(*address));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return systemError("listen on " + addressText(*address));
  }
  return fd;
}

Result<SocketAddress> localAddress(int fd) {
  SocketAddress out;
  out.length = sizeof(out.storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&out.storage), &out.length) != 0) {
    return systemError("getsockname");
  }
  return out;
}

Result<Fd> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs) {
  int lastErrno = 0;
  do {
    Fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      return systemError("socket");
    }
    int rc =
        ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
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
      return systemError("connect to " + addressText(address), lastErrno);
    }
    ::usleep(10000);
  } while (monotonicNs() < deadlineNs);
  return timeoutError(
      "no connection to " + addressText(address) + " before the deadline" +
          (lastErrno != 0 ? std::string(" (last error: ") + std::to_string(lastErrno) + ")"
                          : std::string()),
      addressText(address));
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
