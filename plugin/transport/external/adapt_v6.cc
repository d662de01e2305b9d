// ncclNetPlugin_v6 (NCCL ~2.12) as a Transport. Differences from v11 that
// this shim bridges: init(logger) once per process, no contexts; listen and
// connect without ctx; connect/accept without a device handle; int sizes on
// regMr, isend and irecv (larger sizes are refused); no phandles; v6
// properties (no regIsGlobal, forceFlush, device type or size limits: NCCL
// assumes 1 GiB / 512 MiB).
#include "nccl/net_v6.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV6 final : public Shim<ncclNet_v6_t> {
 public:
  TransportV6(PluginBinding binding, const ncclNet_v6_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t /*commId*/, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }

  Status innerConnect(ExternalContext* /*ctx*/, int dev, void* handle,
                      DeviceHandleRequest /*wantDeviceHandle*/, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    *sendComm = nullptr;
    *deviceHandle = nullptr;  // no device offload before v7
    return closeOnError(check(net_->connect(dev, handle, sendComm), "connect"), sendComm,
                        Side::kSend);
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV6(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v6_t*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, 6));
  return std::unique_ptr<ExternalTransport>(new TransportV6(std::move(binding), net));
}

}  // namespace resilient::transport::external
