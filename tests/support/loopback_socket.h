// A TCP socket bound to 127.0.0.1 on a port the kernel chose, for tests that
// need an address where nobody answers: bound only, connections to it are
// refused; listening, connections complete in the kernel's backlog and no
// byte ever comes back (a frozen server).
#pragma once

#include <cstdint>

#include "common/file_descriptor.h"

namespace resilient::test {

struct LoopbackSocket {
  FileDescriptor fd;
  uint16_t port = 0;
};

// Throws std::runtime_error when the socket cannot be made.
LoopbackSocket bindLoopback(bool listening);

}  // namespace resilient::test
