// The physical baseline of resilient-nettest --raw-tcp: plain TCP sockets of
// our own behind the same Transport interface, so the host engine runs the
// very same patterns without any plugin. Deliberately minimal: each
// connection is `sockets` TCP_NODELAY sockets; every message is split into
// one contiguous slice per socket, each slice preceded by the message's
// 8-byte size; all progress happens inside isend/test on the calling thread
// (no helper threads), like a single NCCL proxy thread pumping sockets.
//
// Handle: magic, socket count, job token and the listening address. Each
// socket opens with a 32-byte hello (magic, version, index, count, job
// token, connection id); a socket that fails a check is closed, never
// trusted. maxRecvs is 1: no grouped receives.
//
// Objects (raw_transport.cc): a listener holding the listening socket and
// the sockets whose hellos are pending; send and receive comms holding
// their sockets and a fixed ring of requests made with the comm (the
// sockets work through requests in posting order); a trivial memory region
// (host memory needs no registration). No context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/net/socket.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::raw {

inline constexpr int kRawTcpMaxSockets = 16;

struct RawTcpOptions {
  std::string bindHost = "127.0.0.1";  // address the listening sockets bind to
  int sockets = 1;                     // TCP sockets per connection, 1..kRawTcpMaxSockets
  uint64_t token = 0;                  // job token checked in every hello
  int64_t connectTimeoutMs = 30000;
  int socketBufferBytes = 0;  // SO_SNDBUF/SO_RCVBUF of every socket; 0: autotuned
};

class RawTcpTransport final : public transport::Transport {
 public:
  explicit RawTcpTransport(RawTcpOptions options);
  ~RawTcpTransport() override = default;

  const char* name() const noexcept override { return "raw-tcp"; }
  Status initContext(uint64_t commId, const transport::CommConfig& config,
                     std::unique_ptr<transport::Context>* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, transport::Properties* props) override;
  size_t handleBytes() const noexcept override { return 64; }
  Status listen(transport::Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<transport::Listener>* listener) override;
  Status connect(transport::Context* ctx, int dev, std::byte* handle,
                 transport::DeviceHandleRequest wantDeviceHandle,
                 std::unique_ptr<transport::SendComm>* comm) override;

 private:
  // Every data socket's: no Nagle delay, the configured buffer size.
  SocketOptions socketOptions() const noexcept {
    return {.noDelay = true,
            .keepAlive = {},
            .userTimeoutMs = 0,
            .bufferBytes = options_.socketBufferBytes};
  }

  RawTcpOptions options_;
};

// The local address a socket uses to reach `host` (an interface address;
// "127.0.0.1" for a loopback host). Falls back to `host` itself.
std::string localAddressToward(const std::string& host);

}  // namespace resilient::transport::raw
