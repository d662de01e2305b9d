#include "common/net/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <charconv>
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

Result<std::vector<SocketAddress>> resolveAll(const std::string& host, uint16_t port,
                                              AddressUse use) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (use == AddressUse::kListen ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    return remoteError("cannot resolve address '" + host + "': " + gai_strerror(rc));
  }
  std::vector<SocketAddress> out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen <= sizeof(sockaddr_storage)) {
      SocketAddress a;
      std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
      a.length = ai->ai_addrlen;
      out.push_back(a);
    }
  }
  ::freeaddrinfo(list);
  if (out.empty()) {
    return remoteError("'" + host + "' resolves to no address");
  }
  return out;
}

Result<SocketAddress> resolveAddress(const std::string& host, uint16_t port) {
  Result<std::vector<SocketAddress>> all = resolveAll(host, port);
  if (!all.ok()) {
    return invalidUsage(all.status().message());
  }
  return all->front();
}

Result<HostPort> parseHostPort(std::string_view text, std::string_view defaultHost) {
  HostPort hp;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalidUsage("bad address '" + std::string(text) + "': expected [v6addr]:port");
    }
    hp.host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      hp.host = std::string(defaultHost);
      portText = text;
    } else {
      if (text.find(':') != colon) {
        return invalidUsage("bad address '" + std::string(text) +
                            "': write IPv6 addresses as [addr]:port");
      }
      hp.host = std::string(text.substr(0, colon));
      portText = text.substr(colon + 1);
    }
  }
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || ec != std::errc() || ptr != portText.data() + portText.size() ||
      port > 65535) {
    return invalidUsage("bad port in address '" + std::string(text) + "'");
  }
  if (hp.host.empty()) {
    if (defaultHost.empty()) {
      return invalidUsage("no host in address '" + std::string(text) + "'");
    }
    hp.host = std::string(defaultHost);
  }
  hp.port = static_cast<uint16_t>(port);
  return hp;
}

std::string formatHostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
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
