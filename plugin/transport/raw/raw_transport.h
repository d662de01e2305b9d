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
#pragma once

#include <cstdint>
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
  Status initContext(uint64_t commId, const transport::CommConfig& config, void** ctx) override;
  Status finalizeContext(void* ctx) override;
  Status devices(int* ndev) override;
  Status properties(int dev, transport::Properties* props) override;
  size_t handleBytes() const noexcept override { return 64; }
  Status listen(void* ctx, int dev, void* handle, void** listenComm) override;
  Status connect(void* ctx, int dev, void* handle, void** sendComm) override;
  Status accept(void* listenComm, void** recvComm) override;
  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override;
  Status deregMr(void* comm, void* mhandle) override;
  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) override;
  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) override;
  Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                void** request) override;
  Status test(void* request, int* done, int* sizes) override;
  Status closeSend(void* sendComm) override;
  Status closeRecv(void* recvComm) override;
  Status closeListen(void* listenComm) override;

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
