// Socket plumbing of the TCP transport: the conversions between socket
// addresses and the listen handle and Endpoint, socket options, and the one
// classification of I/O failures into Status kinds.
#pragma once

#include <cstdint>
#include <string>

#include "common/file_descriptor.h"
#include "common/socket_address.h"
#include "common/status.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::tcp {

// The address in a listen handle, and the listen handle of an address.
SocketAddress toSocketAddress(const ListenHandle& handle) noexcept;
ListenHandle toListenHandle(const SocketAddress& address) noexcept;
// The address as the transport seam's Endpoint ("10.0.0.2:40000", truncated to fit).
Endpoint toEndpoint(const SocketAddress& address) noexcept;

// A non-blocking, close-on-exec TCP socket of `family`.
Status openStreamSocket(int family, FileDescriptor* out);
// TCP_NODELAY, TCP_USER_TIMEOUT, SO_KEEPALIVE with short idle/interval/count,
// and SO_SNDBUF/SO_RCVBUF when options.socketBufferBytes is set.
Status setConnectionOptions(int fd, const TcpOptions& options);

// The Status of a failed socket call on a connection to `peer`. err == 0 means
// end of file. Peer-caused failures (EOF, reset, broken pipe, timeouts,
// unreachable) are remote errors; anything else is a system error.
Status connectionError(int err, const char* what, const std::string& peer);

}  // namespace resilient::transport::tcp
