#include "plugin/transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace resilient::transport::tcp {
namespace {

// Keepalive of idle connections: first probe after 5 s of silence, then every
// second, 5 probes (TCP_USER_TIMEOUT, when set, bounds the total).
constexpr int kKeepIdleS = 5;
constexpr int kKeepIntervalS = 1;
constexpr int kKeepCount = 5;

Status setIntOption(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof value) != 0) {
    return systemError(std::string("tcp: setsockopt ") + what);
  }
  return {};
}

}  // namespace

void FileDescriptor::reset(int fd) noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

uint16_t SocketAddress::port() const noexcept {
  if (family() == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  }
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

void SocketAddress::setPort(uint16_t port) noexcept {
  if (family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  } else if (family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  }
}

std::string SocketAddress::hostText() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof buf);
    return buf;
  }
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    std::string text = buf;
    if (in6->sin6_scope_id != 0) {
      text += "%" + std::to_string(in6->sin6_scope_id);
    }
    return text;
  }
  return "?";
}

std::string SocketAddress::toString() const {
  if (family() == AF_INET) {
    return hostText() + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    return "[" + hostText() + "]:" + std::to_string(port());
  }
  return "?";
}

Endpoint SocketAddress::toEndpoint() const noexcept {
  Endpoint e;
  try {
    const std::string text = toString();
    const size_t n = text.size() < sizeof e.text - 1 ? text.size() : sizeof e.text - 1;
    std::memcpy(e.text, text.data(), n);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory leaves the endpoint empty
  }
  return e;
}

SocketAddress SocketAddress::fromSockaddr(const sockaddr* addr) noexcept {
  SocketAddress a;
  if (addr == nullptr) {
    return a;
  }
  if (addr->sa_family == AF_INET) {
    a.length = sizeof(sockaddr_in);
  } else if (addr->sa_family == AF_INET6) {
    a.length = sizeof(sockaddr_in6);
  } else {
    return a;
  }
  std::memcpy(&a.storage, addr, a.length);
  return a;
}

SocketAddress SocketAddress::fromHandle(const ListenHandle& handle) noexcept {
  SocketAddress a;
  if (handle.family == AF_INET6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(handle.port);
    in6.sin6_scope_id = handle.scopeId;
    std::memcpy(&in6.sin6_addr, handle.address, sizeof in6.sin6_addr);
    std::memcpy(&a.storage, &in6, sizeof in6);
    a.length = sizeof in6;
  } else {
    sockaddr_in in4{};
    in4.sin_family = AF_INET;
    in4.sin_port = htons(handle.port);
    std::memcpy(&in4.sin_addr, handle.address, sizeof in4.sin_addr);
    std::memcpy(&a.storage, &in4, sizeof in4);
    a.length = sizeof in4;
  }
  return a;
}

ListenHandle SocketAddress::toHandle() const noexcept {
  ListenHandle h;
  h.family = family();
  h.port = port();
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    std::memcpy(h.address, &in6->sin6_addr, sizeof in6->sin6_addr);
    h.scopeId = in6->sin6_scope_id;
  } else {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(&storage);
    std::memcpy(h.address, &in4->sin_addr, sizeof in4->sin_addr);
  }
  return h;
}

SocketAddress localAddressOf(int fd) noexcept {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (getsockname(fd, a.get(), &a.length) != 0) {
    return {};
  }
  return a;
}

SocketAddress peerAddressOf(int fd) noexcept {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (getpeername(fd, a.get(), &a.length) != 0) {
    return {};
  }
  return a;
}

Status openStreamSocket(int family, FileDescriptor* out) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) {
    return systemError("tcp: socket");
  }
  out->reset(fd);
  return {};
}

Status setConnectionOptions(int fd, const TcpOptions& options) {
  RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  if (options.tcpUserTimeoutMs > 0) {
    RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, options.tcpUserTimeoutMs,
                               "TCP_USER_TIMEOUT"));
  }
  RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepIdleS, "TCP_KEEPIDLE"));
  RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepIntervalS, "TCP_KEEPINTVL"));
  RESILIENT_TRY(setIntOption(fd, IPPROTO_TCP, TCP_KEEPCNT, kKeepCount, "TCP_KEEPCNT"));
  return {};
}

Status connectionError(int err, const char* what, const std::string& peer) {
  switch (err) {
    case 0: return remoteError(std::string("connection closed by the peer during ") + what, peer);
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case ECONNREFUSED:
      return remoteError(std::string("connection failed during ") + what, peer, err);
    default: return systemError(std::string("tcp: ") + what + " failed", err, peer);
  }
}

uint64_t nowNs() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string errnoText(int err) {
  char buf[128];
  // GNU strerror_r: thread-safe, returns a pointer to the text.
  return strerror_r(err, buf, sizeof buf);
}

}  // namespace resilient::transport::tcp
