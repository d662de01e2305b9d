// The TCP transport's addresses as it hands them out: the conversions between
// a socket address and the listen handle (wire.h) and the transport seam's
// Endpoint. The sockets themselves are common/net/socket.h's.
#pragma once

#include <cstdint>

#include "common/net/socket_address.h"
#include "plugin/transport/tcp/wire.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::tcp {

// The address in a listen handle, and the listen handle of an address.
SocketAddress toSocketAddress(const ListenHandle& handle) noexcept;
ListenHandle toListenHandle(const SocketAddress& address) noexcept;
// The address as the transport seam's Endpoint ("10.0.0.2:40000", truncated to fit).
Endpoint toEndpoint(const SocketAddress& address) noexcept;

}  // namespace resilient::transport::tcp
