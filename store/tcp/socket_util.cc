#include "store/tcp/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "common/status.h"
#include "store/errors.h"

namespace resilient::store::tcp {

HostPort parseHostPort(std::string_view text, std::string_view defaultHost) {
  HostPort hp;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw InvalidArgument("bad address '" + std::string(text) + "': expected [v6addr]:port");
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
        throw InvalidArgument("bad address '" + std::string(text) +
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
    throw InvalidArgument("bad port in address '" + std::string(text) + "'");
  }
  if (hp.host.empty()) {
    if (defaultHost.empty()) {
      throw InvalidArgument("no host in address '" + std::string(text) + "'");
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

std::vector<SocketAddress> resolve(const std::string& host, uint16_t port, AddressUse use) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (use == AddressUse::kListen ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    throw ConnectionLost("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::vector<SocketAddress> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen <= sizeof(sockaddr_storage)) {
      SocketAddress a;
      std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
      a.length = ai->ai_addrlen;
      out.push_back(a);
    }
  }
  freeaddrinfo(res);
  if (out.empty()) {
    throw ConnectionLost("'" + host + "' resolves to no address");
  }
  return out;
}

FileDescriptor listenOn(const SocketAddress& addr, int backlog) {
  FileDescriptor fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    throw StoreError(StoreErrc::kInvalidArgument, "socket(): " + errnoText(errno));
  }
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), addr.get(), addr.length) != 0) {
    throw StoreError(StoreErrc::kInvalidArgument,
                     "cannot bind " + addr.toString() + ": " + errnoText(errno));
  }
  if (::listen(fd.get(), backlog) != 0) {
    throw StoreError(StoreErrc::kInvalidArgument,
                     "cannot listen on " + addr.toString() + ": " + errnoText(errno));
  }
  return fd;
}

void setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) {
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setQuickAck(int fd, bool on) {
  int v = on ? 1 : 0;
  ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &v, sizeof v);
}

void setKeepAlive(int fd) {
  int one = 1;
  int idle = 5;
  int interval = 2;
  int count = 5;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace resilient::store::tcp
