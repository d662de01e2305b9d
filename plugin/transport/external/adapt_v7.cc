// ncclNetPlugin_v7 (NCCL 2.19) as a Transport. Over v6: properties carry the
// device type; connect/accept take a device-handle out-pointer, and the
// device-offload members getDeviceMr and irecvConsumed appear (all passed
// through, shim.h). Still init(logger) once per process, no contexts, int
// sizes (larger sizes are refused), no phandles, 1 GiB / 512 MiB size limits.
#include "nccl/net_v7.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV7 final : public Shim<ncclNet_v7_t> {
 public:
  TransportV7(PluginBinding binding, const ncclNet_v7_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t /*commId*/, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }

  Status innerConnect(ExternalContext* /*ctx*/, int dev, void* handle,
                      DeviceHandleRequest wantDeviceHandle, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    return connectWithDeviceHandle(wantDeviceHandle, sendComm, deviceHandle, [&](ncclNetDeviceHandle_v7_t** devHandle) {
      return net_->connect(dev, handle, sendComm, devHandle);
    });
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV7(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v7_t*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, 7));
  return std::unique_ptr<ExternalTransport>(new TransportV7(std::move(binding), net));
}

}  // namespace resilient::transport::external
