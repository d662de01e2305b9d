// ncclNetPlugin_v11 (NCCL 2.28.3+) as a Transport: the newest ABI, whose
// semantics the Transport interface has, so calls map one to one. init runs
// per context with commId and config, and finalize(ctx) ends each context.
// Our context wraps the plugin's so that the config the plugin may keep a
// pointer to lives until finalize. As NCCL does, a failed init is followed
// by finalize of whatever context the plugin produced. makeVDevice,
// irecvConsumed, getDeviceMr and setNetAttr are not used.
#include "nccl/net_v11.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {
namespace {

class TransportV11 final : public Shim<ncclNet_v11_t> {
 public:
  TransportV11(PluginBinding binding, const ncclNet_v11_t* net) : Shim(std::move(binding), net) {}

  Status initContext(uint64_t commId, const CommConfig& config, void** ctx) override {
    *ctx = nullptr;
    auto context = std::make_unique<Context>();
    context->config.trafficClass = config.trafficClass;
    Status s =
        check(net_->init(&context->inner, commId, &context->config, logger(), profilerCallback()),
              "init");
    if (s.ok()) {
      s = validateMembers(net_, 11);  // init may fill the table
    }
    if (!s.ok()) {
      if (net_->finalize != nullptr) {
        (void)net_->finalize(context->inner);
      }
      return s;
    }
    *ctx = context.release();
    contextCreated();
    return Status();
  }

  Status finalizeContext(void* ctx) override {
    if (ctx == nullptr) {
      return Status();  // what a failed initContext returned; finalize already ran
    }
    std::unique_ptr<Context> context(contextOf(ctx));
    contextFinalized();
    if (net_->finalize == nullptr) {
      return Status();
    }
    return check(net_->finalize(context->inner), "finalize");
  }

  Status connect(void* ctx, int dev, void* handle, void** sendComm) override {
    void* inner = innerContextOf(ctx);
    return connectWithDeviceHandle(sendComm, [&](ncclNetDeviceHandle_v11_t** devHandle) {
      return net_->connect(inner, dev, handle, sendComm, devHandle);
    });
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV11(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v11_t*>(binding.symbol);
  // The rest of the table is checked after init, which may fill it. finalize
  // is called unconditionally by NCCL, but a NULL one is tolerated here.
  RESILIENT_TRY(validateLoadable(net, 11));
  return std::unique_ptr<ExternalTransport>(new TransportV11(std::move(binding), net));
}

}  // namespace resilient::transport::external
