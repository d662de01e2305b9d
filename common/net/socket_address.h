// An IPv4 or IPv6 socket address, its text, and the addresses of a socket and
// of a host name.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace resilient {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;  // 0: no address

  int family() const noexcept { return storage.ss_family; }
  uint16_t port() const noexcept;  // 0 for a family other than AF_INET/AF_INET6
  void setPort(uint16_t port) noexcept;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  // "10.0.0.2:40000", "[fd00::2]:40000", "[fe80::1%2]:40000"; "?" when empty.
  std::string toString() const;
  // "10.0.0.2", "fd00::2", "fe80::1%2" (no port); "?" when empty.
  std::string hostText() const;

  // A copy of an AF_INET or AF_INET6 address; empty for any other family or nullptr.
  static SocketAddress fromSockaddr(const sockaddr* addr) noexcept;
};

// What an address is resolved for: with an empty host, kListen gives the
// wildcard addresses.
enum class AddressUse { kConnect, kListen };
// Every address of a numeric or named host ("127.0.0.1", "::1", "localhost")
// with `port`, in the resolver's order. A remote error when it does not resolve.
Result<std::vector<SocketAddress>> resolveAll(const std::string& host, uint16_t port,
                                              AddressUse use = AddressUse::kConnect);
// The first of them; invalidUsage when it does not resolve.
Result<SocketAddress> resolveAddress(const std::string& host, uint16_t port);

// A host and port as people write them.
struct HostPort {
  std::string host;  // name or numeric address, without brackets
  uint16_t port = 0;
};
// "host:port" or "[v6addr]:port"; a bare "port" or ":port" takes
// `defaultHost` (invalidUsage when there is none, or on a bad port).
Result<HostPort> parseHostPort(std::string_view text, std::string_view defaultHost = {});
// "host:port", "[v6addr]:port".
std::string formatHostPort(const std::string& host, uint16_t port);

// Local and peer address of a socket (an empty address on failure, errno set).
SocketAddress localAddressOf(int fd) noexcept;
SocketAddress peerAddressOf(int fd) noexcept;

}  // namespace resilient
