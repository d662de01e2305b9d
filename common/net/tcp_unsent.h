// The bytes a connected TCP socket was given and has not sent yet
// (TCP_INFO's tcpi_notsent_bytes, Linux 4.6 and later): the network (or the
// congestion window) is behind now. A slow link keeps unsent bytes queued; a
// fast one sends at once. Read by the TCP transport for the net plugin's
// watchdog (plugin/transport/transport.h, linkBacklogged). Any thread.
//
// Not the kernel's "busy" time (tcpi_busy_time, minus the receive-window and
// send-buffer stalls): it includes waiting for acknowledgements, which a
// delayed ACK stretches, and made fast links look half as fast as they are
// (docs/observability.md, "Slow links").
#pragma once

#include <cstdint>

namespace resilient::net {

// False when `fd` is not a TCP socket or the kernel lacks the field.
bool tcpUnsentBytes(int fd, uint64_t* bytes) noexcept;

}  // namespace resilient::net
