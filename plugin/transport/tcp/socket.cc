#include "plugin/transport/tcp/socket.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>

#include <cerrno>
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

SocketAddress toSocketAddress(const ListenHandle& handle) noexcept {
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

ListenHandle toListenHandle(const SocketAddress& address) noexcept {
  ListenHandle h;
  h.family = address.family();
  h.port = address.port();
  if (address.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    std::memcpy(h.address, &in6->sin6_addr, sizeof in6->sin6_addr);
    h.scopeId = in6->sin6_scope_id;
  } else {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(&address.storage);
    std::memcpy(h.address, &in4->sin_addr, sizeof in4->sin_addr);
  }
  return h;
}

Endpoint toEndpoint(const SocketAddress& address) noexcept {
  Endpoint e;
  try {
    const std::string text = address.toString();
    const size_t n = text.size() < sizeof e.text - 1 ? text.size() : sizeof e.text - 1;
    std::memcpy(e.text, text.data(), n);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory leaves the endpoint empty
  }
  return e;
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
  if (options.socketBufferBytes > 0) {
    RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_SNDBUF, options.socketBufferBytes, "SO_SNDBUF"));
    RESILIENT_TRY(setIntOption(fd, SOL_SOCKET, SO_RCVBUF, options.socketBufferBytes, "SO_RCVBUF"));
  }
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

}  // namespace resilient::transport::tcp
