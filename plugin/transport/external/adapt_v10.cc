// ncclNetPlugin_v10 (NCCL 2.26.2) as a Transport. As v9 (init once per
// process, device-handle out-pointer on connect/accept with offload refused,
// size_t sizes), plus: init takes the profiler callback; connect takes the
// per-communicator config, which v11 gives init, so our context keeps it
// from initContext to connect; isend/irecv take phandle(s), passed through.
#include "nccl/net_v10.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV10 final : public Shim<ncclNet_v10_t> {
 public:
  TransportV10(PluginBinding binding, const ncclNet_v10_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t /*commId*/, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    return legacyInitContext(
        config, ctx, [&] { return check(net_->init(logger(), profilerCallback()), "init"); });
  }

  Status innerConnect(ExternalContext* ctx, int dev, void* handle,
                      DeviceHandleRequest wantDeviceHandle, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    // Without a context (a caller that skipped initContext) the config is
    // "undefined", as NCCL passes it when the user set none.
    ncclNetCommConfig_v10_t fallback{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclNetCommConfig_v10_t* config = ctx != nullptr ? &ctx->config : &fallback;
    return connectWithDeviceHandle(wantDeviceHandle, sendComm, deviceHandle, [&](ncclNetDeviceHandle_v10_t** devHandle) {
      return net_->connect(dev, config, handle, sendComm, devHandle);
    });
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV10(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v10_t*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, 10));
  return std::unique_ptr<ExternalTransport>(new TransportV10(std::move(binding), net));
}

}  // namespace resilient::transport::external
