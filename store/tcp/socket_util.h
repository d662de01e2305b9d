// Socket plumbing of the TCP store beyond the common layer's descriptors and
// addresses (common): "host:port" parsing, every address of a host,
// listening sockets and the socket options of store connections.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_descriptor.h"
#include "common/socket_address.h"

namespace resilient::store::tcp {

struct HostPort {
  std::string host;  // name or numeric address, without brackets
  uint16_t port = 0;
};
// "host:port" or "[v6addr]:port"; a bare "port" or ":port" takes
// `defaultHost` (InvalidArgument when there is none, or on a bad port).
HostPort parseHostPort(std::string_view text, std::string_view defaultHost = {});
std::string formatHostPort(const std::string& host, uint16_t port);

// What a resolved address is for: connecting to it, or listening on it (an
// empty host then means every local address).
enum class AddressUse { kConnect, kListen };

// Every address `host` resolves to (numeric hosts without DNS). Throws
// ConnectionLost when the name does not resolve.
std::vector<SocketAddress> resolve(const std::string& host, uint16_t port, AddressUse use);

// A non-blocking, close-on-exec listening socket bound to `addr`
// (SO_REUSEADDR). Throws StoreError.
FileDescriptor listenOn(const SocketAddress& addr, int backlog);

void setNonBlocking(int fd);
void setNoDelay(int fd);
// TCP_QUICKACK. Off: this socket's next ACK waits to ride on our next write
// (or the delayed-ACK timer) instead of costing a packet of its own. On: data
// received is ACKed now. The kernel may switch modes on its own, so callers
// set it per exchange.
void setQuickAck(int fd, bool on);
// TCP keepalive that notices a vanished peer host within ~15 s.
void setKeepAlive(int fd);

}  // namespace resilient::store::tcp
