#include "common/net/tcp_unsent.h"

// The kernel's own struct tcp_info: glibc's <netinet/tcp.h> stops before
// tcpi_notsent_bytes, and the two headers do not mix, so this file includes
// only the kernel's.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace resilient::net {

bool tcpUnsentBytes(int fd, uint64_t* bytes) noexcept {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_notsent_bytes) + sizeof info.tcpi_notsent_bytes) {
    return false;
  }
  *bytes = info.tcpi_notsent_bytes;
  return true;
}

}  // namespace resilient::net
