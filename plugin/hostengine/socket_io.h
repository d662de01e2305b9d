// Small socket helpers of the host engine (rendezvous, raw TCP pump,
// launcher): an owning descriptor, address resolution, listening sockets
// and deadline-bounded blocking I/O on non-blocking sockets.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugin/common/status.h"

namespace resilient::hostengine {

// CLOCK_MONOTONIC in nanoseconds: comparable between processes of one host.
uint64_t monotonicNs() noexcept;

class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset(other.release());
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// A numeric or named host ("127.0.0.1", "::1", "localhost") and a port.
Result<SocketAddress> resolveAddress(const std::string& host, uint16_t port);
// "127.0.0.1:40000" or "[::1]:40000".
std::string addressText(const SocketAddress& address);
uint16_t addressPort(const SocketAddress& address) noexcept;

// A non-blocking, close-on-exec listening socket bound to host:port (0: an
// ephemeral port), SO_REUSEADDR set.
Result<Fd> listenOn(const std::string& host, uint16_t port, int backlog);
// The address a socket is bound to.
Result<SocketAddress> localAddress(int fd);

Status setNonBlocking(int fd);
Status setNoDelay(int fd);

// A non-blocking connect to `address` that waits until `deadlineNs`
// (monotonicNs), retrying while the peer refuses (it may not listen yet).
Result<Fd> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs);

// Sends or receives exactly `bytes` on a non-blocking socket before
// `deadlineNs`. An orderly close by the peer is a remote error.
Status sendAll(int fd, const void* data, size_t bytes, uint64_t deadlineNs, const char* what);
Status recvAll(int fd, void* data, size_t bytes, uint64_t deadlineNs, const char* what);

}  // namespace resilient::hostengine
