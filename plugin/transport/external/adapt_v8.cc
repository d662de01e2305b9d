// ncclNetPlugin_v8 (NCCL 2.20) as a Transport. As v7 (init(logger) once per
// process, no contexts, device-handle out-pointer on connect/accept with
// offload refused, no phandles, 1 GiB / 512 MiB size limits), plus:
// properties carry regIsGlobal; regMr takes a size_t. isend/irecv still take
// int sizes (larger sizes are refused).
#include "nccl/net_v8.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV8 final : public Shim<ncclNet_v8_t> {
 public:
  TransportV8(PluginBinding binding, const ncclNet_v8_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t /*commId*/, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }

  Status innerConnect(ExternalContext* /*ctx*/, int dev, void* handle,
                      DeviceHandleRequest wantDeviceHandle, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    return connectWithDeviceHandle(wantDeviceHandle, sendComm, deviceHandle, [&](ncclNetDeviceHandle_v8_t** devHandle) {
      return net_->connect(dev, handle, sendComm, devHandle);
    });
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV8(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v8_t*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, 8));
  return std::unique_ptr<ExternalTransport>(new TransportV8(std::move(binding), net));
}

}  // namespace resilient::transport::external
