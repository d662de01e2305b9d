// ncclNetPlugin_v9 (NCCL 2.24) as a Transport. As v8 (init(logger) once per
// process, no contexts, device-handle out-pointer on connect/accept with
// offload refused, no phandles), plus: size_t sizes on isend/irecv;
// properties carry forceFlush, maxP2pBytes and maxCollBytes (taken as the
// plugin reports them). vProps and makeVDevice (NIC fusion) are not used.
#include "nccl/net_v9.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV9 final : public Shim<ncclNet_v9_t> {
 public:
  TransportV9(PluginBinding binding, const ncclNet_v9_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t /*commId*/, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }

  Status innerConnect(ExternalContext* /*ctx*/, int dev, void* handle,
                      DeviceHandleRequest wantDeviceHandle, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    return connectWithDeviceHandle(wantDeviceHandle, sendComm, deviceHandle, [&](ncclNetDeviceHandle_v9_t** devHandle) {
      return net_->connect(dev, handle, sendComm, devHandle);
    });
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV9(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v9_t*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, 9));
  return std::unique_ptr<ExternalTransport>(new TransportV9(std::move(binding), net));
}

}  // namespace resilient::transport::external
