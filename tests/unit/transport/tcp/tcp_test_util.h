// Helpers of the TCP transport tests: loopback options, and raw sockets that
// talk to a listen port directly. Pairs of transports, request polling and
// round trips are tests/support/transport_pair.h.
#pragma once

#include <string>

#include "plugin/transport/tcp/options.h"

namespace resilient::test {

// Loopback ("lo"), the given family, short timeouts suited to tests.
transport::tcp::TcpOptions loopbackOptions(int family = 0);

// A blocking TCP connection to the address in a listen handle (-1 on failure).
int rawConnect(const void* handle);

// "ip:port" of the local end of a socket.
std::string localAddressText(int fd);

}  // namespace resilient::test
