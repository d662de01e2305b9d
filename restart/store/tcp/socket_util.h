// Socket plumbing of the TCP store: owned descriptors, "host:port" parsing,
// listening and connecting sockets, and errno text.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resilient::store::tcp {

class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset(o.release());
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // name or numeric address, without brackets
  uint16_t port = 0;
};
// "host:port" or "[v6addr]:port"; a bare "port" or ":port" takes
// `defaultHost` (InvalidArgument when there is none, or on a bad port).
HostPort parseHostPort(std::string_view text, std::string_view defaultHost = {});
std::string formatHostPort(const std::string& host, uint16_t port);

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const noexcept { return storage.ss_family; }
  uint16_t port() const noexcept;
  std::string toString() const;  // "1.2.3.4:5", "[::1]:5"
};

// Every address `host` resolves to (numeric hosts without DNS). Throws
// ConnectionLost when the name does not resolve.
std::vector<SockAddr> resolve(const std::string& host, uint16_t port, bool passive);

// A non-blocking, close-on-exec listening socket bound to `addr`
// (SO_REUSEADDR). Throws StoreError.
Fd listenOn(const SockAddr& addr, int backlog);
SockAddr localAddress(int fd);
SockAddr peerAddress(int fd);

void setNonBlocking(int fd);
void setNoDelay(int fd);
// TCP_QUICKACK. Off: this socket's next ACK waits to ride on our next write
// (or the delayed-ACK timer) instead of costing a packet of its own. On: data
// received is ACKed now. The kernel may switch modes on its own, so callers
// set it per exchange.
void setQuickAck(int fd, bool on);
// TCP keepalive that notices a vanished peer host within ~15 s.
void setKeepAlive(int fd);

// "Connection refused (errno 111)".
std::string errnoText(int err);

}  // namespace resilient::store::tcp
