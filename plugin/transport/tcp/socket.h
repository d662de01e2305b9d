// Socket plumbing of the TCP transport: an owned file descriptor, socket
// addresses and their text, socket options, and the one classification of
// I/O failures into Status kinds.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <utility>

#include "plugin/common/status.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/wire.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::tcp {

// An owned file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  ~FileDescriptor() { reset(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      reset(other.release());
    }
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const noexcept { return storage.ss_family; }
  uint16_t port() const noexcept;
  void setPort(uint16_t port) noexcept;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  // "10.0.0.2:40000", "[fd00::2]:40000"; "?" when empty.
  std::string toString() const;
  Endpoint toEndpoint() const noexcept;
  // "10.0.0.2", "fd00::2" (no port).
  std::string hostText() const;

  static SocketAddress fromSockaddr(const sockaddr* addr) noexcept;
  static SocketAddress fromHandle(const ListenHandle& handle) noexcept;
  ListenHandle toHandle() const noexcept;
};

// Local and peer address of a connected socket (empty address on failure).
SocketAddress localAddressOf(int fd) noexcept;
SocketAddress peerAddressOf(int fd) noexcept;

// A non-blocking, close-on-exec TCP socket of `family`.
Status openStreamSocket(int family, FileDescriptor* out);
// TCP_NODELAY, TCP_USER_TIMEOUT, SO_KEEPALIVE with short idle/interval/count.
Status setConnectionOptions(int fd, const TcpOptions& options);

// The Status of a failed socket call on a connection to `peer`. err == 0 means
// end of file. Peer-caused failures (EOF, reset, broken pipe, timeouts,
// unreachable) are remote errors; anything else is a system error.
Status connectionError(int err, const char* what, const std::string& peer);

// Monotonic clock in nanoseconds (steady_clock).
uint64_t nowNs() noexcept;

// The text of errno `err` (thread-safe).
std::string errnoText(int err);

}  // namespace resilient::transport::tcp
