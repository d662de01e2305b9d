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

  Status initContext(uint64_t /*commId*/, const CommConfig& config, void** ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }
  Status finalizeContext(void* ctx) override { return legacyFinalizeContext(ctx); }

  Status properties(int dev, Properties* props) override {
    ncclNetProperties_v6_t p{};
    RESILIENT_TRY(check(net_->getProperties(dev, &p), "getProperties"));
    convertCommon(p, props);
    return Status();
  }

  Status listen(void* /*ctx*/, int dev, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    return check(net_->listen(dev, handle, listenComm), "listen");
  }

  Status connect(void* /*ctx*/, int dev, void* handle, void** sendComm) override {
    *sendComm = nullptr;
    return closeOnError(check(net_->connect(dev, handle, sendComm), "connect"), sendComm, true);
  }

  Status accept(void* listenComm, void** recvComm) override {
    *recvComm = nullptr;
    return closeOnError(check(net_->accept(listenComm, recvComm), "accept"), recvComm, false);
  }

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    if (!fitsInt(size)) {
      return tooLarge("regMr", size);
    }
    return check(net_->regMr(comm, data, static_cast<int>(size), type, mhandle), "regMr");
  }

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* /*phandle*/,
               void** request) override {
    *request = nullptr;
    if (!fitsInt(size)) {
      return tooLarge("isend", size);
    }
    return check(net_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request),
                 "isend");
  }

  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** /*phandles*/, void** request) override {
    std::array<int, kMaxRecvN> ownSizes{};
    std::array<int, kMaxRecvN> ownTags{};
    Status s = prepareRecv(n, sizes, tags, &ownSizes, &ownTags);
    if (s.ok()) {
      s = check(net_->irecv(recvComm, n, data, ownSizes.data(), ownTags.data(), mhandles, request),
                "irecv");
    }
    if (!s.ok()) {
      *request = nullptr;
    }
    return s;
  }
};

}  // namespace

Result<std::unique_ptr<ExternalTransport>> makeV6(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v6_t*>(binding.symbol);
  RESILIENT_TRY(validateMembers(net, 6));
  return std::unique_ptr<ExternalTransport>(new TransportV6(std::move(binding), net));
}

}  // namespace resilient::transport::external
