// The per-communicator-context ABIs (v11, NCCL 2.28.3+, and v12, NCCL 2.30)
// as a Transport: the newest ABIs, whose semantics the Transport interface
// has, so calls map one to one. init runs per context with commId and
// config, and finalize(ctx) ends each context (Context::finalize, or its
// destruction). Our context wraps the plugin's so that the config the
// plugin may keep a pointer to lives until finalize. As NCCL does, a failed
// init is followed by finalize of whatever context the plugin produced.
// The optional members are passed through (shim.h). The two versions
// differ only in their properties (the shim reads what each has).
#pragma once

#include <memory>
#include <utility>

#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {

template <class Net, int kVersion>
class ContextTransport final : public Shim<Net> {
  using Shim<Net>::net_;
  using Shim<Net>::check;
  using Shim<Net>::logger;
  using Shim<Net>::profilerCallback;
  using Shim<Net>::contextCreated;
  using Shim<Net>::connectWithDeviceHandle;

 public:
  ContextTransport(PluginBinding binding, const Net* net) : Shim<Net>(std::move(binding), net) {}

  Status initContext(uint64_t commId, const CommConfig& config,
                     std::unique_ptr<Context>* ctx) override {
    ctx->reset();
    auto context = std::make_unique<ExternalContext>(*this, config);
    Status s =
        check(net_->init(&context->inner, commId, &context->config, logger(), profilerCallback()),
              "init");
    if (s.ok()) {
      s = validateMembers(net_, kVersion);  // init may fill the table
    }
    if (!s.ok()) {
      if (net_->finalize != nullptr) {
        (void)net_->finalize(context->inner);
      }
      return s;  // never counted as live: its destruction finalizes nothing more
    }
    contextCreated(*context);
    *ctx = std::move(context);
    return Status();
  }

  Status innerFinalize(ExternalContext& ctx) override {
    if (net_->finalize == nullptr) {
      return Status();
    }
    return check(net_->finalize(ctx.inner), "finalize");
  }

  Status innerConnect(ExternalContext* ctx, int dev, void* handle,
                      DeviceHandleRequest wantDeviceHandle, void** sendComm,
                      DeviceHandle** deviceHandle) override {
    void* inner = innerContextOf(ctx);
    return connectWithDeviceHandle(wantDeviceHandle, sendComm, deviceHandle, [&](ncclNetDeviceHandle_v7_t** devHandle) {
      return net_->connect(inner, dev, handle, sendComm, devHandle);
    });
  }
};

// Loads a context-ABI table: the rest is checked after init, which may fill
// it. finalize is called unconditionally by NCCL, but a NULL one is tolerated.
template <class Net, int kVersion>
Result<std::unique_ptr<ExternalTransport>> makeContextTransport(PluginBinding binding) {
  const auto* net = static_cast<const Net*>(binding.symbol);
  RESILIENT_TRY(validateLoadable(net, kVersion));
  return std::unique_ptr<ExternalTransport>(
      new ContextTransport<Net, kVersion>(std::move(binding), net));
}

}  // namespace resilient::transport::external
