#include "common/net/tcp_timing.h"

// The kernel's own struct tcp_info: glibc's <netinet/tcp.h> stops before the
// chrono fields, and the two headers do not mix, so this file includes only
// the kernel's.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace resilient::net {

bool readTcpTiming(int fd, TcpTiming* out) noexcept {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_sndbuf_limited) + sizeof info.tcpi_sndbuf_limited ||
      len < offsetof(tcp_info, tcpi_notsent_bytes) + sizeof info.tcpi_notsent_bytes) {
    return false;
  }
  // tcpi_busy_time sums the three chrono states; the other two are stalls
  // the network did not cause.
  const uint64_t stalled = info.tcpi_rwnd_limited + info.tcpi_sndbuf_limited;
  out->networkLimitedUs = info.tcpi_busy_time > stalled ? info.tcpi_busy_time - stalled : 0;
  out->bytesAcked = info.tcpi_bytes_acked;
  out->notSentBytes = info.tcpi_notsent_bytes;
  return true;
}

}  // namespace resilient::net
