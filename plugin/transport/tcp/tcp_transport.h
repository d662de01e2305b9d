// Our own TCP inner transport (transport.h): one device per selected network
// interface; a connection is one control socket plus nSocks data sockets
// served by nThreads helper threads (see comm.h, stripe_engine.h, wire.h).
//
// Lifetime: the transport must outlive every comm it created. Devices are
// enumerated at the first devices()/properties()/listen()/connect() call,
// never at construction.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "plugin/transport/tcp/devices.h"
#include "plugin/transport/tcp/listener.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::tcp {

class Connector;

class TcpTransport final : public Transport {
 public:
  // Out-of-range options are clamped (clampOptions).
  explicit TcpTransport(const TcpOptions& options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  const TcpOptions& options() const noexcept { return options_; }

  const char* name() const noexcept override { return "tcp"; }

  Status initContext(uint64_t commId, const CommConfig& config, void** ctx) override;
  Status finalizeContext(void* ctx) override;

  Status devices(int* ndev) override;
  Status properties(int dev, Properties* props) override;

  size_t handleBytes() const noexcept override;

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

  bool bytesMoved(void* comm, uint64_t* bytes) noexcept override;
  // Send comms: whether any of its sockets has bytes the kernel has not sent
  // yet (common/net/tcp_unsent.h).
  bool linkBacklogged(void* comm, bool* backlogged) noexcept override;
  bool endpoints(void* comm, Endpoint* local, Endpoint* peer) noexcept override;

 private:
  Status ensureDevices();
  Status checkDevice(int dev);

  const TcpOptions options_;
  std::string hostname_;

  std::mutex devicesMutex_;
  std::atomic<bool> devicesLoaded_{false};
  Status devicesStatus_;
  std::vector<Device> devices_;  // immutable once devicesLoaded_

  // Connections in progress, by the address of the handle NCCL polls with.
  std::mutex connectingMutex_;
  std::unordered_map<const void*, std::unique_ptr<Connector>> connecting_;

  ListenWarnLimiters listenWarnLimiters_;
};

}  // namespace resilient::transport::tcp
