// Our own TCP inner transport (transport.h): one device per selected network
// interface; a connection is one control socket plus nSocks data sockets
// served by nThreads helper threads (see comm.h, stripe_engine.h, wire.h).
//
// Objects: listen() makes a TcpListener (listener.h), whose accept() makes
// TcpRecvComms; connect() makes TcpSendComms (connector.h, comm.h).
//
// Lifetime: the transport must outlive every listener and comm it created.
// Devices are enumerated at the first devices()/properties()/listen()/
// connect() call, never at construction.
#pragma once

#include <atomic>
#include <cstddef>
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

  // No per-communicator state: *ctx stays empty.
  Status initContext(uint64_t commId, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override;

  Status devices(int* ndev) override;
  Status properties(int dev, Properties* props) override;

  size_t handleBytes() const noexcept override;

  Status listen(Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<Listener>* listener) override;
  Status connect(Context* ctx, int dev, std::byte* handle, DeviceHandleRequest wantDeviceHandle,
                 std::unique_ptr<SendComm>* comm) override;

 private:
  Status ensureDevices();
  Status checkDevice(int dev);

  const TcpOptions options_;
  std::string hostname_;

  std::mutex devicesMutex_;
  std::atomic<bool> devicesLoaded_{false};
  Status devicesStatus_;
  std::vector<Device> devices_;  // immutable once devicesLoaded_

  // Connections in progress, by the address of the handle NCCL polls with
  // (connect() gets the same buffer at each poll of one connection,
  // transport.h): as NCCL's own socket plugin keeps its connect state per
  // handle, but here, not inside the handle bytes.
  std::mutex connectingMutex_;
  std::unordered_map<const std::byte*, std::unique_ptr<Connector>> connecting_;

  ListenWarnLimiters listenWarnLimiters_;
};

}  // namespace resilient::transport::tcp
