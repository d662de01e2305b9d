#include "common/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

namespace resilient {

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

namespace {

// getsockname or getpeername into a SocketAddress.
SocketAddress queryAddress(int fd, int (*query)(int, sockaddr*, socklen_t*)) noexcept {
  SocketAddress a;
  a.length = sizeof a.storage;
  if (query(fd, a.get(), &a.length) != 0) {
    return {};
  }
  return a;
}

}  // namespace

SocketAddress localAddressOf(int fd) noexcept {
  return queryAddress(fd, &::getsockname);
}

SocketAddress peerAddressOf(int fd) noexcept {
  return queryAddress(fd, &::getpeername);
}

}  // namespace resilient
