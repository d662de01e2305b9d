// The kernel's account of a connected TCP socket's sending (TCP_INFO, Linux
// 4.10 and later): the bytes written and not sent yet (the network, or the
// congestion window, is behind now), how long it had data to send with the
// network as the limit (the "chrono" statistics: not the peer's receive
// window, not our send buffer; this includes waiting for acknowledgements,
// which a delayed ACK stretches), and the bytes the peer acknowledged. A slow
// link keeps unsent bytes queued; a fast one sends at once. Read by the TCP
// transport for the net plugin's watchdog (plugin/transport/transport.h,
// linkBacklogged). Any thread.
#pragma once

#include <cstdint>

namespace resilient::net {

struct TcpTiming {
  uint64_t networkLimitedUs = 0;
  uint64_t bytesAcked = 0;
  uint64_t notSentBytes = 0;  // written by us, not sent yet: the network is behind now
};

// False when `fd` is not a TCP socket or the kernel lacks these fields.
bool readTcpTiming(int fd, TcpTiming* out) noexcept;

}  // namespace resilient::net
