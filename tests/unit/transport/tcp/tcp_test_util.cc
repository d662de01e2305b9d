#include "tests/unit/transport/tcp/tcp_test_util.h"

#include <sys/socket.h>
#include <unistd.h>

#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::test {

using transport::tcp::TcpOptions;

TcpOptions loopbackOptions(int family) {
  TcpOptions o;
  o.ifname = "lo";
  o.family = family;
  o.connectTimeoutMs = 5000;
  o.handshakeTimeoutMs = 2000;
  o.tcpUserTimeoutMs = 5000;
  o.nSocks = 2;
  o.nThreads = 2;
  return o;
}

int rawConnect(const void* handle) {
  transport::tcp::ListenHandle h;
  if (!transport::tcp::decodeHandle(handle, &h).ok()) {
    return -1;
  }
  const auto address = transport::tcp::toSocketAddress(h);
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  if (::connect(fd, address.get(), address.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string localAddressText(int fd) {
  return localAddressOf(fd).toString();
}

}  // namespace resilient::test
