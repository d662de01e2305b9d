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

  Status initContext(uint64_t /*commId*/, const CommConfig& config, void** ctx) override {
    return legacyInitContext(
        config, ctx, [&] { return check(net_->init(logger(), profilerCallback()), "init"); });
  }
  Status finalizeContext(void* ctx) override { return legacyFinalizeContext(ctx); }

  Status properties(int dev, Properties* props) override {
    ncclNetProperties_v10_t p{};
    RESILIENT_TRY(check(net_->getProperties(dev, &p), "getProperties"));
    RESILIENT_TRY(requireHostDevice(dev, p.netDeviceType));
    convertCommon(p, props);
    props->regIsGlobal = p.regIsGlobal;
    props->forceFlush = p.forceFlush;
    props->maxP2pBytes = p.maxP2pBytes;
    props->maxCollBytes = p.maxCollBytes;
    return Status();
  }

  Status listen(void* /*ctx*/, int dev, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    return check(net_->listen(dev, handle, listenComm), "listen");
  }

  Status connect(void* ctx, int dev, void* handle, void** sendComm) override {
    // Without a context (a caller that skipped initContext) the config is
    // "undefined", as NCCL passes it when the user set none.
    ncclNetCommConfig_v10_t fallback{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclNetCommConfig_v10_t* config = ctx != nullptr ? &contextOf(ctx)->config : &fallback;
    return connectWithDeviceHandle(sendComm, [&](ncclNetDeviceHandle_v10_t** devHandle) {
      return net_->connect(dev, config, handle, sendComm, devHandle);
    });
  }

  Status accept(void* listenComm, void** recvComm) override {
    return acceptWithDeviceHandle(listenComm, recvComm);
  }

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    return check(net_->regMr(comm, data, size, type, mhandle), "regMr");
  }

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) override {
    *request = nullptr;
    return check(net_->isend(sendComm, data, size, tag, mhandle, phandle, request), "isend");
  }

  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) override {
    std::array<size_t, kMaxRecvN> ownSizes{};
    std::array<int, kMaxRecvN> ownTags{};
    Status s = prepareRecv(n, sizes, tags, &ownSizes, &ownTags);
    if (s.ok()) {
      s = check(net_->irecv(recvComm, n, data, ownSizes.data(), ownTags.data(), mhandles, phandles,
                            request),
                "irecv");
    }
    if (!s.ok()) {
      *request = nullptr;
    }
    return s;
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV10(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v10_t*>(binding.symbol);
  RESILIENT_TRY(validateMembers(net, 10));
  return std::unique_ptr<ExternalTransport>(new TransportV10(std::move(binding), net));
}

}  // namespace resilient::transport::external
