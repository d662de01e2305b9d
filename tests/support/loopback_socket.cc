#include "tests/support/loopback_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace resilient::test {

LoopbackSocket bindLoopback(bool listening) {
  LoopbackSocket s;
  s.fd = FileDescriptor(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!s.fd.valid() || ::bind(s.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      (listening && ::listen(s.fd.get(), 16) != 0) ||
      ::getsockname(s.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("loopback socket: ") + std::strerror(errno));
  }
  s.port = ntohs(addr.sin_port);
  return s;
}

}  // namespace resilient::test
