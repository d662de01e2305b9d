// Socket helpers of the host engine's control paths (rendezvous, raw TCP
// pump, launcher): listening sockets, and blocking I/O bounded by a deadline
// (monotonicNs, common/clock.h) on non-blocking sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/file_descriptor.h"
#include "common/socket_address.h"
#include "common/status.h"

namespace resilient::hostengine {

// A non-blocking, close-on-exec listening socket bound to host:port (0: an
// ephemeral port), SO_REUSEADDR set.
Result<FileDescriptor> listenOn(const std::string& host, uint16_t port, int backlog);

Status setNonBlocking(int fd);
Status setNoDelay(int fd);
// SO_SNDBUF and SO_RCVBUF = bytes (the kernel doubles it, up to net.core.*mem_max);
// bytes <= 0 leaves the buffers to the kernel's autotuning.
Status setBufferBytes(int fd, int bytes);

// A non-blocking connect to `address` that waits until `deadlineNs`,
// retrying while the peer refuses (it may not listen yet).
Result<FileDescriptor> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs);

// Sends or receives exactly `bytes` on a non-blocking socket before
// `deadlineNs`. An orderly close by the peer is a remote error.
Status sendAll(int fd, const void* data, size_t bytes, uint64_t deadlineNs, const char* what);
Status recvAll(int fd, void* data, size_t bytes, uint64_t deadlineNs, const char* what);

}  // namespace resilient::hostengine
