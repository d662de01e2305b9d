// What the version shims (adapt_v6.cc ... adapt_v11.cc) share. Internal to
// plugin/transport/external: only the shims and the loader include it.
//
// Each shim derives from Shim<ncclNet_vN_t>, which implements the calls whose
// signature did not change from v6 to v11 (devices, deregMr, iflush, test,
// close*), and adds the version-specific ones. The shims never see each
// other's structs; the loader reaches them through the make* functions.
#pragma once

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nccl/net_common.h"
#include "nccl/result.h"
#include "plugin/common/status.h"
#include "plugin/transport/external/external_transport.h"

namespace resilient::transport::external {

// Our per-communicator context, whatever the version: the config NCCL gives
// v11 init (v10 wants it at connect) and, for v11, the plugin's own context.
// Heap-allocated so that the config a plugin may keep a pointer to outlives
// the initContext call.
struct Context {
  ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  void* inner = nullptr;  // the v11 plugin's ctx; unused before v11
};

inline Context* contextOf(void* ctx) noexcept {
  return static_cast<Context*>(ctx);
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

// Checks the members every version has and NCCL calls unconditionally, plus
// `extra` (version-specific ones).
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

// True when a size fits the int size parameters of the older calls (regMr
// up to v7, isend/irecv up to v8).
inline bool fitsInt(size_t size) noexcept {
  return size <= static_cast<size_t>(INT_MAX);
}

template <class Net>
class Shim : public ExternalTransport {
 public:
  Status devices(int* ndev) override {
    *ndev = 0;
    return check(net_->devices(ndev), "devices");
  }

  Status deregMr(void* comm, void* mhandle) override {
    return check(net_->deregMr(comm, mhandle), "deregMr");
  }

  Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
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

  Status test(void* request, int* done, int* sizes) override {
    *done = 0;
    return check(net_->test(request, done, sizes), "test");
  }

  Status closeSend(void* sendComm) override {
    return check(net_->closeSend(sendComm), "closeSend");
  }
  Status closeRecv(void* recvComm) override {
    return check(net_->closeRecv(recvComm), "closeRecv");
  }
  Status closeListen(void* listenComm) override {
    return check(net_->closeListen(listenComm), "closeListen");
  }

 protected:
  Shim(PluginBinding binding, const Net* net)
      : ExternalTransport(std::move(binding), net->name), net_(net) {}

  // The common validations of an irecv; copies sizes/tags into the arrays the
  // ABI takes (non-const). SizeT is size_t (v9+) or int (<= v8).
  template <class SizeT>
  Status prepareRecv(int n, const size_t* sizes, const int* tags,
                     std::array<SizeT, kMaxRecvN>* ownSizes, std::array<int, kMaxRecvN>* ownTags) {
    if (n < 1 || n > kMaxRecvN) {
      return refuse("irecv",
                    "n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRecvN));
    }
    for (int i = 0; i < n; ++i) {
      if constexpr (sizeof(SizeT) < sizeof(size_t)) {
        if (!fitsInt(sizes[i])) {
          return tooLarge("irecv", sizes[i]);
        }
      }
      (*ownSizes)[i] = static_cast<SizeT>(sizes[i]);
      (*ownTags)[i] = tags[i];
    }
    return Status();
  }

  // The error of a size an int-sized ABI (<= v8) cannot carry; NCCL refuses
  // those sizes too instead of truncating them.
  Status tooLarge(const char* call, size_t size) const {
    return refuse(call, "size " + std::to_string(size) +
                            " exceeds INT_MAX, the largest this plugin's ABI version takes");
  }

  // The properties fields every version has, and the limits NCCL assumes for
  // the versions without maxP2pBytes/maxCollBytes (<= v8).
  template <class P>
  void convertCommon(const P& p, Properties* props) {
    *props = Properties{};
    props->name = keep(p.name);
    props->pciPath = keep(p.pciPath);
    props->guid = p.guid;
    props->ptrSupport = p.ptrSupport;
    props->speedMbps = p.speed;
    props->port = p.port;
    props->latencyUs = p.latency;
    props->maxComms = p.maxComms;
    props->maxRecvs = p.maxRecvs;
    props->maxP2pBytes = NCCL_NET_LEGACY_MAX_SIZE;
    props->maxCollBytes = NCCL_COLLNET_LEGACY_MAX_SIZE;
  }

  // v7+ properties: only host devices can be driven from host memory.
  Status requireHostDevice(int dev, ncclNetDeviceType type) const {
    if (type == NCCL_NET_DEVICE_HOST) {
      return Status();
    }
    return refuse("getProperties", "device " + std::to_string(dev) + " reports netDeviceType " +
                                       std::to_string(static_cast<int>(type)) +
                                       " (device offload), which the resilient wrapper does "
                                       "not support; only NCCL_NET_DEVICE_HOST (0) is");
  }

  // connect of v7+: `connectFn(ncclNetDeviceHandle_v7_t**)` calls the
  // version's connect. A non-NULL device handle means the plugin wants device
  // offload, which a host-memory wrapper cannot give it: the comm is closed
  // and the call fails. A comm produced together with an error is closed too
  // (NCCL does the same).
  template <class ConnectFn>
  Status connectWithDeviceHandle(void** sendComm, ConnectFn connectFn) {
    *sendComm = nullptr;
    ncclNetDeviceHandle_v7_t* devHandle = nullptr;
    Status s = check(connectFn(&devHandle), "connect");
    if (s.ok() && devHandle != nullptr) {
      s = refuse("connect", kOffloadRefused);
    }
    if (!s.ok() && *sendComm != nullptr) {
      (void)net_->closeSend(*sendComm);
      *sendComm = nullptr;
    }
    return s;
  }

  // accept of v7+ (same signature in v7..v11), with the same rules.
  Status acceptWithDeviceHandle(void* listenComm, void** recvComm) {
    *recvComm = nullptr;
    ncclNetDeviceHandle_v7_t* devHandle = nullptr;
    Status s = check(net_->accept(listenComm, recvComm, &devHandle), "accept");
    if (s.ok() && devHandle != nullptr) {
      s = refuse("accept", kOffloadRefused);
    }
    if (!s.ok() && *recvComm != nullptr) {
      (void)net_->closeRecv(*recvComm);
      *recvComm = nullptr;
    }
    return s;
  }

  // connect/accept of v6, which have no device handle.
  Status closeOnError(Status s, void** comm, bool send) {
    if (!s.ok() && *comm != nullptr) {
      (void)(send ? net_->closeSend(*comm) : net_->closeRecv(*comm));
      *comm = nullptr;
    }
    return s;
  }

  static constexpr const char* kOffloadRefused =
      "the plugin returned a device handle (device offload), which the resilient wrapper does "
      "not support";

  // Pre-v11 plugins are initialised once per process; NCCL keeps that with a
  // reference count over its per-communicator init calls. The plugin's init
  // runs when the first context is created and never again for the life of
  // the library (before v11 there is no finalize to undo it); a failed init
  // stays failed. The contexts are ours. initFn: () -> Status.
  template <class InitFn>
  Status legacyInitContext(const CommConfig& config, void** ctx, InitFn initFn) {
    *ctx = nullptr;
    {
      std::lock_guard<std::mutex> lock(legacyMutex_);
      if (!legacyInitialised_) {
        if (!legacyInitError_.ok()) {
          return legacyInitError_;
        }
        Status s = initFn();
        if (!s.ok()) {
          legacyInitError_ = s;
          return s;
        }
        legacyInitialised_ = true;
      }
    }
    auto context = std::make_unique<Context>();
    context->config.trafficClass = config.trafficClass;
    *ctx = context.release();
    contextCreated();
    return Status();
  }

  Status legacyFinalizeContext(void* ctx) {
    if (ctx == nullptr) {
      return Status();  // what a failed initContext returned
    }
    delete contextOf(ctx);
    contextFinalized();
    return Status();
  }

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

}  // namespace resilient::transport::external
