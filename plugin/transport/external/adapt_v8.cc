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

  Status initContext(uint64_t /*commId*/, const CommConfig& config, void** ctx) override {
    return legacyInitContext(config, ctx, [&] { return check(net_->init(logger()), "init"); });
  }
  Status finalizeContext(void* ctx) override { return legacyFinalizeContext(ctx); }

  Status properties(int dev, Properties* props) override {
    ncclNetProperties_v8_t p{};
    RESILIENT_TRY(check(net_->getProperties(dev, &p), "getProperties"));
    RESILIENT_TRY(requireHostDevice(dev, p.netDeviceType));
    convertCommon(p, props);
    props->regIsGlobal = p.regIsGlobal;
    return Status();
  }

  Status listen(void* /*ctx*/, int dev, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    return check(net_->listen(dev, handle, listenComm), "listen");
  }

  Status connect(void* /*ctx*/, int dev, void* handle, void** sendComm) override {
    return connectWithDeviceHandle(sendComm, [&](ncclNetDeviceHandle_v8_t** devHandle) {
      return net_->connect(dev, handle, sendComm, devHandle);
    });
  }

  Status accept(void* listenComm, void** recvComm) override {
    return acceptWithDeviceHandle(listenComm, recvComm);
  }

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    return check(net_->regMr(comm, data, size, type, mhandle), "regMr");
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

Result<std::unique_ptr<ExternalTransport>> makeV8(PluginBinding binding) {
  const auto* net = static_cast<const ncclNet_v8_t*>(binding.symbol);
  RESILIENT_TRY(validateMembers(net, 8));
  return std::unique_ptr<ExternalTransport>(new TransportV8(std::move(binding), net));
}

}  // namespace resilient::transport::external
