// What the version shims (adapt_v6.cc ... adapt_v12.cc) share. Internal to
// plugin/transport/external: only the shims and the loader include it.
//
// Each shim derives from Shim<ncclNet_vN_t>. Shim implements every plugin
// call (ExternalTransport's inner*, on the plugin's own pointers) whose
// shape follows from the version's own declarations (Signature below reads
// them off the struct's function pointers):
//  - devices, deregMr, iflush, test, close*: the same in every version;
//  - properties: the fields the version's properties struct has;
//  - listen: the plugin's context first from v11;
//  - accept: a device-handle out-pointer from v7, passed through;
//  - the optional members (regMrDmaBuf, getDeviceMr, irecvConsumed,
//    makeVDevice, setNetAttr) where the version has them and the table's
//    pointer is set (capabilities());
//  - regMr, isend, irecv: int sizes up to v7 (regMr) and v8 (isend, irecv),
//    larger sizes refused as NCCL refuses them; profiler handles from v10.
// A shim adds what differs in substance: initContext, innerFinalize (v11+;
// nothing before) and innerConnect. The shims never see each other's
// structs; the loader reaches them through the make* functions.
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/signature.h"
#include "common/status.h"
#include "nccl/net_common.h"
#include "nccl/result.h"
#include "plugin/transport/external/external_transport.h"

namespace resilient::transport::external {

// The v11+ plugin's own context inside ours (nullptr without one).
inline void* innerContextOf(ExternalContext* ctx) noexcept {
  return ctx != nullptr ? ctx->inner : nullptr;
}

// A required member of a plugin struct, for validation at load time.
struct Member {
  const char* name;
  bool present;
};

// invalidUsage naming every required member that is NULL, else ok.
Status requireMembers(const std::string& plugin, int version, const std::vector<Member>& members);

// The plugin's name field for messages ("(unnamed)" when NULL or empty).
const char* displayName(const char* name) noexcept;

// What NCCL needs of a plugin struct when it loads it: init. NCCL calls init
// before it touches any other member, and some plugins (nccl-rdma-sharp-
// plugins) export a struct holding only the name and init, which fills in
// the rest.
template <class Net>
Status validateLoadable(const Net* net, int version) {
  return requireMembers(displayName(net->name), version, {{"init", net->init != nullptr}});
}

// After a successful init: the members every version has and NCCL calls
// unconditionally, plus `extra` (version-specific ones).
template <class Net>
Status validateMembers(const Net* net, int version, std::initializer_list<Member> extra = {}) {
  std::vector<Member> members{
      {"init", net->init != nullptr},
      {"devices", net->devices != nullptr},
      {"getProperties", net->getProperties != nullptr},
      {"listen", net->listen != nullptr},
      {"connect", net->connect != nullptr},
      {"accept", net->accept != nullptr},
      {"regMr", net->regMr != nullptr},
      {"deregMr", net->deregMr != nullptr},
      {"isend", net->isend != nullptr},
      {"irecv", net->irecv != nullptr},
      {"iflush", net->iflush != nullptr},
      {"test", net->test != nullptr},
      {"closeSend", net->closeSend != nullptr},
      {"closeRecv", net->closeRecv != nullptr},
      {"closeListen", net->closeListen != nullptr},
  };
  members.insert(members.end(), extra.begin(), extra.end());
  return requireMembers(displayName(net->name), version, members);
}

// A net or CollNet properties struct of any version (ncclNetProperties_vN_t)
// as ours: every field the version has, passed through unchanged; NCCL's
// limits for the versions without maxP2pBytes/maxCollBytes (<= v8).
// keep: a copy of a string that lives as long as the transport.
template <class P, class Keep>
Properties propertiesOf(const P& p, Keep keep) {
  Properties props;
  props.name = keep(p.name);
  props.pciPath = keep(p.pciPath);
  props.guid = p.guid;
  props.ptrSupport = p.ptrSupport;
  props.speedMbps = p.speed;
  props.port = p.port;
  props.latencyUs = p.latency;
  props.maxComms = p.maxComms;
  props.maxRecvs = p.maxRecvs;
  props.maxP2pBytes = NCCL_NET_LEGACY_MAX_SIZE;
  props.maxCollBytes = NCCL_COLLNET_LEGACY_MAX_SIZE;
  if constexpr (requires { p.netDeviceType; }) {  // v7+
    props.netDeviceType = static_cast<int>(p.netDeviceType);
    props.netDeviceVersion = p.netDeviceVersion;
  }
  if constexpr (requires { p.regIsGlobal; }) {  // v8+
    props.regIsGlobal = p.regIsGlobal;
  }
  if constexpr (requires { p.maxP2pBytes; }) {  // v9+
    props.forceFlush = p.forceFlush;
    props.maxP2pBytes = p.maxP2pBytes;
    props.maxCollBytes = p.maxCollBytes;
    constexpr int kDevs = static_cast<int>(sizeof p.vProps.devs / sizeof p.vProps.devs[0]);
    static_assert(kDevs <= kMaxFusedDevices);
    props.vProps.ndevs = std::clamp(p.vProps.ndevs, 0, kDevs);
    for (int i = 0; i < props.vProps.ndevs; ++i) {
      props.vProps.devs[i] = p.vProps.devs[i];
    }
  }
  if constexpr (requires { p.maxMultiRequestSize; }) {  // v11+
    props.maxMultiRequestSize = p.maxMultiRequestSize;
  }
  if constexpr (requires { p.railId; }) {  // v12
    props.railId = p.railId;
    props.planeId = p.planeId;
  }
  return props;
}

template <class Net>
class Shim : public ExternalTransport {
  using NetProperties =
      std::remove_pointer_t<typename Signature<decltype(Net::getProperties)>::template Param<1>>;
  using ListenFn = Signature<decltype(Net::listen)>;
  using AcceptFn = Signature<decltype(Net::accept)>;
  using RegMrFn = Signature<decltype(Net::regMr)>;
  using IsendFn = Signature<decltype(Net::isend)>;
  using IrecvFn = Signature<decltype(Net::irecv)>;
  // int up to v7 (regMr) and v8 (isend, irecv), size_t after.
  using RegMrSize = typename RegMrFn::template Param<2>;
  using SendSize = typename IsendFn::template Param<2>;
  using RecvSize = std::remove_pointer_t<typename IrecvFn::template Param<3>>;
  static constexpr bool kContextListen = ListenFn::kArity == 4;   // v11
  static constexpr bool kDeviceHandles = AcceptFn::kArity == 3;   // v7+
  static constexpr bool kProfilerHandles = IsendFn::kArity == 7;  // v10+
  static_assert(IrecvFn::kArity == (kProfilerHandles ? 8 : 7));
  // The fused devices the version's vProps holds (v9+; 0 before).
  template <class P>
  static constexpr int fusedDevices() {
    if constexpr (requires(P p) { p.vProps; }) {
      return static_cast<int>(sizeof(P::vProps.devs) / sizeof(int));
    } else {
      return 0;
    }
  }
  static constexpr int kFusedDevices = fusedDevices<NetProperties>();
  static_assert(kFusedDevices <= kMaxFusedDevices);
  template <class N>
  static auto vdeviceProps() {
    if constexpr (requires(N n) { n.makeVDevice; }) {
      return std::remove_pointer_t<typename Signature<decltype(N::makeVDevice)>::template Param<1>>{};
    } else {
      return 0;
    }
  }
  using VDeviceProps = decltype(vdeviceProps<Net>());

 public:
  Status devices(int* ndev) override {
    *ndev = 0;
    return check(net_->devices(ndev), "devices");
  }

  // The fields the version's properties have, passed through unchanged
  // (propertiesOf).
  Status properties(int dev, Properties* props) override {
    NetProperties p{};
    RESILIENT_TRY(check(net_->getProperties(dev, &p), "getProperties"));
    *props = propertiesOf(p, [this](const char* text) { return keep(text); });
    return Status();
  }

  // The optional members the plugin's table has (after init, which may fill it).
  Capabilities capabilities() const noexcept override {
    Capabilities caps;
    caps.regMrDmaBuf = net_->regMrDmaBuf != nullptr;
    if constexpr (requires { net_->getDeviceMr; }) {  // v7+
      caps.getDeviceMr = net_->getDeviceMr != nullptr;
      caps.irecvConsumed = net_->irecvConsumed != nullptr;
    }
    if constexpr (requires { net_->makeVDevice; }) {  // v9+
      caps.makeVDevice = net_->makeVDevice != nullptr;
    }
    if constexpr (requires { net_->setNetAttr; }) {  // v11+
      caps.setNetAttr = net_->setNetAttr != nullptr;
    }
    return caps;
  }

  Status makeVDevice(const VirtualDevice& props, int* dev) override {
    *dev = -1;
    if constexpr (requires { net_->makeVDevice; }) {
      if (net_->makeVDevice != nullptr) {
        if (props.ndevs < 0 || props.ndevs > kFusedDevices) {
          return refuse("makeVDevice", "ndevs = " + std::to_string(props.ndevs) +
                                           " is outside 0.." + std::to_string(kFusedDevices));
        }
        VDeviceProps p{};
        p.ndevs = props.ndevs;
        for (int i = 0; i < props.ndevs; ++i) {
          p.devs[i] = props.devs[i];
        }
        return check(net_->makeVDevice(dev, &p), "makeVDevice");
      }
    }
    (void)props;
    return refuse("makeVDevice", "the plugin has no makeVDevice");
  }

  Status setNetAttr(Context* ctx, NetAttributes* attr) override {
    if constexpr (requires { net_->setNetAttr; }) {
      if (net_->setNetAttr != nullptr) {
        // Our contexts are the only ones NCCL hands back (initContext made them);
        // the attributes are NCCL's ncclNetAttr_v11_t (v12's is the same).
        return check(net_->setNetAttr(innerContextOf(static_cast<ExternalContext*>(ctx)),
                                      reinterpret_cast<ncclNetAttr_v11_t*>(attr)),
                     "setNetAttr");
      }
    }
    (void)ctx, (void)attr;
    return refuse("setNetAttr", "the plugin has no setNetAttr");
  }

  Status innerListen(ExternalContext* ctx, int dev, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    if constexpr (kContextListen) {
      return check(net_->listen(innerContextOf(ctx), dev, handle, listenComm), "listen");
    } else {
      (void)ctx;  // ours: the plugin has none before v11
      return check(net_->listen(dev, handle, listenComm), "listen");
    }
  }

  // A comm produced together with an error is closed (NCCL does the same).
  // The device handle (v7+) is passed through: the out-pointer given when
  // the caller gives one, pointing at what the caller's pointed at (NULL, or
  // the handle NCCL allocated for an UNPACK receive, which the plugin fills
  // in), and whatever the plugin leaves there handed back.
  Status innerAccept(void* listenComm, DeviceHandleRequest wantDeviceHandle, void** recvComm,
                     DeviceHandle** deviceHandle) override {
    *recvComm = nullptr;
    *deviceHandle = nullptr;
    Status s;
    if constexpr (kDeviceHandles) {
      auto* devHandle = reinterpret_cast<ncclNetDeviceHandle_v7_t*>(wantDeviceHandle.handle);
      s = check(net_->accept(listenComm, recvComm, wantDeviceHandle ? &devHandle : nullptr),
                "accept");
      *deviceHandle = reinterpret_cast<DeviceHandle*>(devHandle);
    } else {
      (void)wantDeviceHandle;
      s = check(net_->accept(listenComm, recvComm), "accept");
    }
    return closeOnError(std::move(s), recvComm, Side::kRecv);
  }

  Status innerRegMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    *mhandle = nullptr;
    RegMrSize narrow{};
    RESILIENT_TRY(narrowSize("regMr", size, &narrow));
    return check(net_->regMr(comm, data, narrow, type, mhandle), "regMr");
  }

  Status innerRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                          void** mhandle) override {
    *mhandle = nullptr;
    if (net_->regMrDmaBuf == nullptr) {
      return refuse("regMrDmaBuf", "the plugin has no regMrDmaBuf");
    }
    return check(net_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle), "regMrDmaBuf");
  }

  Status innerGetDeviceMr(void* comm, void* mhandle, void** deviceRegion) override {
    *deviceRegion = nullptr;
    if constexpr (requires { net_->getDeviceMr; }) {
      if (net_->getDeviceMr != nullptr) {
        return check(net_->getDeviceMr(comm, mhandle, deviceRegion), "getDeviceMr");
      }
    }
    (void)comm, (void)mhandle;
    return refuse("getDeviceMr", "the plugin has no getDeviceMr");
  }

  Status innerDeregMr(void* comm, void* mhandle) override {
    return check(net_->deregMr(comm, mhandle), "deregMr");
  }

  Status innerIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                    void** request) override {
    *request = nullptr;
    SendSize narrow{};
    RESILIENT_TRY(narrowSize("isend", size, &narrow));
    if constexpr (kProfilerHandles) {
      return check(net_->isend(sendComm, data, narrow, tag, mhandle, phandle, request), "isend");
    } else {
      (void)phandle;  // no profiler handles before v10
      return check(net_->isend(sendComm, data, narrow, tag, mhandle, request), "isend");
    }
  }

  Status innerIrecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                    void** mhandles, void** phandles, void** request) override {
    std::array<RecvSize, kMaxRecvN> ownSizes;  // the first n entries: not zeroed (data path)
    std::array<int, kMaxRecvN> ownTags;
    Status s = prepareRecv(n, sizes, tags, &ownSizes, &ownTags);
    if (s.ok()) {
      if constexpr (kProfilerHandles) {
        s = check(net_->irecv(recvComm, n, data, ownSizes.data(), ownTags.data(), mhandles,
                              phandles, request),
                  "irecv");
      } else {
        (void)phandles;
        s = check(
            net_->irecv(recvComm, n, data, ownSizes.data(), ownTags.data(), mhandles, request),
            "irecv");
      }
    }
    if (!s.ok()) {
      *request = nullptr;
    }
    return s;
  }

  Status innerIflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                     void** request) override {
    *request = nullptr;
    if (n < 1 || n > kMaxRecvN) {
      return refuse("iflush",
                    "n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRecvN));
    }
    std::array<int, kMaxRecvN> ownSizes{};  // the ABI takes int* (not const)
    for (int i = 0; i < n; ++i) {
      ownSizes[i] = sizes[i];
    }
    Status s = check(net_->iflush(recvComm, n, data, ownSizes.data(), mhandles, request), "iflush");
    if (!s.ok()) {
      *request = nullptr;
    }
    return s;
  }

  Status innerTest(void* request, int* done, int* sizes) override {
    *done = 0;
    return check(net_->test(request, done, sizes), "test");
  }

  Status innerIrecvConsumed(void* recvComm, int n, void* request) override {
    if constexpr (requires { net_->irecvConsumed; }) {
      if (net_->irecvConsumed != nullptr) {
        return check(net_->irecvConsumed(recvComm, n, request), "irecvConsumed");
      }
    }
    (void)recvComm;
    (void)n;
    (void)request;
    return Status();
  }

  Status innerCloseSend(void* sendComm) override {
    return check(net_->closeSend(sendComm), "closeSend");
  }
  Status innerCloseRecv(void* recvComm) override {
    return check(net_->closeRecv(recvComm), "closeRecv");
  }
  Status innerCloseListen(void* listenComm) override {
    return check(net_->closeListen(listenComm), "closeListen");
  }

 protected:
  Shim(PluginBinding binding, const Net* net)
      : ExternalTransport(std::move(binding), net->name), net_(net) {}

  // A size as the version's call takes it. An int-sized ABI (regMr <= v7,
  // isend/irecv <= v8) refuses larger sizes, as NCCL does, instead of
  // truncating them.
  template <class Size>
  Status narrowSize(const char* call, size_t size, Size* out) const {
    if constexpr (sizeof(Size) < sizeof(size_t)) {
      if (size > static_cast<size_t>(INT_MAX)) {
        return refuse(call, "size " + std::to_string(size) +
                                " exceeds INT_MAX, the largest this plugin's ABI version takes");
      }
    }
    *out = static_cast<Size>(size);
    return Status();
  }

  // The common validations of an irecv; copies sizes/tags into the arrays the
  // ABI takes (non-const).
  Status prepareRecv(int n, const size_t* sizes, const int* tags,
                     std::array<RecvSize, kMaxRecvN>* ownSizes,
                     std::array<int, kMaxRecvN>* ownTags) const {
    if (n < 1 || n > kMaxRecvN) {
      return refuse("irecv",
                    "n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRecvN));
    }
    for (int i = 0; i < n; ++i) {
      RESILIENT_TRY(narrowSize("irecv", sizes[i], &(*ownSizes)[i]));
      (*ownTags)[i] = tags[i];
    }
    return Status();
  }

  // connect of v7+: `connectFn(ncclNetDeviceHandle_v7_t**)` calls the
  // version's connect with NULL (the caller takes no device handle) or the
  // address of one that points where the caller's did, whose value is
  // passed back. A comm produced together
  // with an error is closed (NCCL does the same).
  template <class ConnectFn>
  Status connectWithDeviceHandle(DeviceHandleRequest wantDeviceHandle, void** sendComm,
                                 DeviceHandle** deviceHandle, ConnectFn connectFn) {
    *sendComm = nullptr;
    *deviceHandle = nullptr;
    auto* devHandle = reinterpret_cast<ncclNetDeviceHandle_v7_t*>(wantDeviceHandle.handle);
    Status s = check(connectFn(wantDeviceHandle ? &devHandle : nullptr), "connect");
    *deviceHandle = reinterpret_cast<DeviceHandle*>(devHandle);
    return closeOnError(std::move(s), sendComm, Side::kSend);
  }

  // Which comm closeOnError closes: connect's send comm or accept's receive comm.
  enum class Side { kSend, kRecv };

  // Closes the comm a failed connect (send) or accept produced.
  Status closeOnError(Status s, void** comm, Side side) {
    if (!s.ok() && *comm != nullptr) {
      (void)(side == Side::kSend ? net_->closeSend(*comm) : net_->closeRecv(*comm));
      *comm = nullptr;
    }
    return s;
  }

  // Pre-v11 plugins are initialised once per process; NCCL keeps that with a
  // reference count over its per-communicator init calls. The plugin's init
  // runs when the first context is created and never again for the life of
  // the library (before v11 there is no finalize to undo it); a failed init
  // stays failed. The contexts are ours. initFn: () -> Status.
  template <class InitFn>
  Status legacyInitContext(const CommConfig& config, std::unique_ptr<Context>* ctx, InitFn initFn) {
    ctx->reset();
    {
      std::lock_guard<std::mutex> lock(legacyMutex_);
      if (!legacyInitialised_) {
        if (!legacyInitError_.ok()) {
          return legacyInitError_;
        }
        Status s = initFn();
        if (s.ok()) {
          s = validateMembers(net_, abiVersion());
        }
        if (!s.ok()) {
          legacyInitError_ = s;
          return s;
        }
        legacyInitialised_ = true;
      }
    }
    auto context = std::make_unique<ExternalContext>(*this, config);
    contextCreated(*context);
    *ctx = std::move(context);
    return Status();
  }

  // Before v11 a context is ours alone: nothing of the plugin to finalize.
  Status innerFinalize(ExternalContext& /*ctx*/) override { return Status(); }

  const Net* net_;

 private:
  std::mutex legacyMutex_;
  bool legacyInitialised_ = false;
  Status legacyInitError_;
};

// One factory per version; `symbol` in the binding is that version's struct.
Result<std::unique_ptr<ExternalTransport>> makeV6(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV7(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV8(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV9(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV10(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV11(PluginBinding binding);
Result<std::unique_ptr<ExternalTransport>> makeV12(PluginBinding binding);

}  // namespace resilient::transport::external
