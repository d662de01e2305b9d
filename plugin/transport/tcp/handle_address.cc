#include "plugin/transport/tcp/handle_address.h"

#include <arpa/inet.h>

#include <cstring>

namespace resilient::transport::tcp {

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

}  // namespace resilient::transport::tcp
