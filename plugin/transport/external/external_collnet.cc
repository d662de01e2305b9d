#include "plugin/transport/external/external_collnet.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>
#include <vector>

#include "common/log.h"
#include "nccl/collnet_v10.h"
#include "nccl/collnet_v11.h"
#include "nccl/collnet_v12.h"
#include "nccl/collnet_v6.h"
#include "nccl/collnet_v7.h"
#include "nccl/collnet_v8.h"
#include "nccl/collnet_v9.h"
#include "plugin/transport/external/external_transport.h"
#include "plugin/transport/external/shim.h"
#include "plugin/transport/request_pool.h"

namespace resilient::transport::external {
namespace {

// Requests per collective comm: NCCL's proxy keeps at most NCCL_STEPS
// collectives and a flush per step out per comm (src/transport/coll_net.cc).
constexpr size_t kCollPoolSize = 2 * static_cast<size_t>(kMaxRequests);
// Pieces of one AllGather/ReduceScatter: NCCL passes at most
// NCCL_MAX_DIRECT_ARITY + 1 (coll_net.cc, collNetIallgather); a margin.
constexpr int kMaxCollParts = 16;

using TestFn = ncclResult_t (*)(void*, int*, int*);
using CloseFn = ncclResult_t (*)(void*);

// What every version's objects share: the plugin's name and version, and
// its errors named the one way.
class CollNetBase : public CollNet {
 public:
  const char* name() const noexcept override { return name_.c_str(); }
  int version() const noexcept { return version_; }

  Status check(ncclResult_t result, const char* call) const {
    if (result == ncclSuccess || result == ncclInProgress) {
      return {};
    }
    // The kinds as pluginStatus gives them for the net.
    Status net = pluginStatus(result, name_, version_, call);
    return Status::error(net.kind(), "external CollNet " + name_ + " (ncclCollNetPlugin_v" +
                                         std::to_string(version_) + "): " + call + " returned " +
                                         ncclResultName(result) + " (" +
                                         std::to_string(static_cast<int>(result)) + ")");
  }
  Status refuse(const char* call, const std::string& why) const {
    return invalidUsage("external CollNet " + name_ + " (ncclCollNetPlugin_v" +
                        std::to_string(version_) + "): " + call + ": " + why);
  }
  // A copy of `text` that lives as long as this CollNet (Properties strings).
  const char* keep(const char* text) {
    if (text == nullptr) {
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return strings_.insert(text).first->c_str();
  }

 protected:
  CollNetBase(const char* name, int version, ncclDebugLogger_t logger)
      : name_(displayName(name)), version_(version), logger_(logger) {}

  const std::string name_;
  const int version_;
  const ncclDebugLogger_t logger_;
  std::mutex mutex_;
  std::set<std::string> strings_;  // node-based: pointers stay valid
  bool initialised_ = false;       // v6-v10: init ran (guarded by mutex_)
};

// One of a comm's pool: the plugin's request while it is out.
class CollRequest final : public Request {
 public:
  Status test(int* done, int* size) override {
    *done = 0;
    int innerDone = 0;
    int innerSize = 0;
    RESILIENT_TRY(owner->check(testFn(inner, &innerDone, &innerSize), "test"));
    if (innerDone != 0) {
      *done = 1;
      if (size != nullptr) {
        *size = innerSize;
      }
      inner = nullptr;
      pool->release(this);
    }
    return {};
  }

  const CollNetBase* owner = nullptr;
  TestFn testFn = nullptr;
  RequestPool<CollRequest>* pool = nullptr;
  void* inner = nullptr;
};

// The v11+ plugin's per-communicator context; finalized once.
class CollContext final : public Context {
 public:
  CollContext(const CollNetBase& owner, CloseFn finalizeFn, void* inner) noexcept
      : owner_(owner), finalize_(finalizeFn), inner_(inner) {}
  ~CollContext() override { (void)finalize(); }
  CollContext(const CollContext&) = delete;
  CollContext& operator=(const CollContext&) = delete;

  Status finalize() override {
    if (!live_ || finalize_ == nullptr) {
      return {};
    }
    live_ = false;
    return owner_.check(finalize_(inner_), "finalize");
  }
  void* inner() const noexcept { return inner_; }

 private:
  const CollNetBase& owner_;
  CloseFn finalize_;
  void* inner_;
  bool live_ = true;
};

class ExternalCollListener final : public CollListener {
 public:
  ExternalCollListener(const CollNetBase& owner, CloseFn closeListen, void* inner) noexcept
      : owner_(owner), close_(closeListen), inner_(inner) {}
  ~ExternalCollListener() override {
    if (open_ && !closeTried_) {
      (void)close();
    }
  }
  ExternalCollListener(const ExternalCollListener&) = delete;
  ExternalCollListener& operator=(const ExternalCollListener&) = delete;

  Status close() override {
    if (!open_) {
      return {};
    }
    closeTried_ = true;
    RESILIENT_TRY(owner_.check(close_(inner_), "closeListen"));
    open_ = false;
    return {};
  }
  void* inner() const noexcept { return inner_; }

 private:
  const CollNetBase& owner_;
  CloseFn close_;
  void* inner_;
  bool open_ = true;
  bool closeTried_ = false;
};

void* mhandleOf(const MemoryRegion* region) noexcept {
  return region != nullptr ? static_cast<const ExternalRegion*>(region)->mhandle() : nullptr;
}

// The scatter-gather entry type of a table with iallgather (v8+).
template <class T>
auto sgeOf() {
  if constexpr (requires(T t) { t.iallgather; }) {
    return std::remove_pointer_t<typename Signature<decltype(T::iallgather)>::template Param<3>>{};
  } else {
    return 0;
  }
}

template <class T>
class ExternalCollComm final : public CollComm {
  using Count = typename Signature<decltype(T::iallreduce)>::template Param<3>;
  using RegSize = typename Signature<decltype(T::regMr)>::template Param<2>;
  using Sge = decltype(sgeOf<T>());

 public:
  ExternalCollComm(const CollNetBase& owner, const T* table, void* inner)
      : owner_(owner), t_(table), inner_(inner), pool_(kCollPoolSize) {
    for (CollRequest& r : pool_.slots()) {
      r.owner = &owner_;
      r.testFn = t_->test;
      r.pool = &pool_;
    }
  }
  ~ExternalCollComm() override {
    if (open_ && !closeTried_) {
      (void)close();
    }
  }
  ExternalCollComm(const ExternalCollComm&) = delete;
  ExternalCollComm& operator=(const ExternalCollComm&) = delete;

  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<MemoryRegion>* region) override {
    region->reset();
    if (std::is_same_v<RegSize, int> && size > static_cast<size_t>(INT_MAX)) {
      // v6/v7 take an int size (NCCL's v6/v7 adapters refuse as much).
      return owner_.refuse("regMr", std::to_string(size) + " bytes exceed this version's int size");
    }
    void* mh = nullptr;
    RESILIENT_TRY(
        owner_.check(t_->regMr(inner_, data, static_cast<RegSize>(size), type, &mh), "regMr"));
    *region = std::make_unique<ExternalRegion>(mh);
    return {};
  }
  Status regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset, int fd,
                     std::unique_ptr<MemoryRegion>* region) override {
    region->reset();
    if (t_->regMrDmaBuf == nullptr) {
      return owner_.refuse("regMrDmaBuf", "the plugin has none");
    }
    void* mh = nullptr;
    RESILIENT_TRY(
        owner_.check(t_->regMrDmaBuf(inner_, data, size, type, offset, fd, &mh), "regMrDmaBuf"));
    *region = std::make_unique<ExternalRegion>(mh);
    return {};
  }
  Status deregMr(std::unique_ptr<MemoryRegion> region) override {
    return owner_.check(t_->deregMr(inner_, mhandleOf(region.get())), "deregMr");
  }
  Status close() override {
    if (!open_) {
      return {};
    }
    closeTried_ = true;
    RESILIENT_TRY(owner_.check(t_->closeColl(inner_), "closeColl"));
    open_ = false;
    return {};
  }

  Status iallreduce(std::byte* send, std::byte* recv, size_t count, Reduction op,
                    MemoryRegion* sendRegion, MemoryRegion* recvRegion,
                    Request** request) override {
    *request = nullptr;
    if (std::is_same_v<Count, int> && count > static_cast<size_t>(INT_MAX)) {
      return owner_.refuse("iallreduce", std::to_string(count) + " elements exceed an int count");
    }
    CollRequest* r = pool_.acquire();
    if (r == nullptr) {
      return {};  // NCCL retries later
    }
    return handOut(
        r,
        t_->iallreduce(inner_, send, recv, static_cast<Count>(count), op.dataType, op.redOp,
                       mhandleOf(sendRegion), mhandleOf(recvRegion), &r->inner),
        "iallreduce", request);
  }

  Status iallgather(std::byte* send, int nRecvParts, const CollPiece* recvParts, CollWindow window,
                    MemoryRegion* sendRegion, Request** request) override {
    *request = nullptr;
    if constexpr (requires { t_->iallgather; }) {
      std::array<Sge, kMaxCollParts> sges{};
      RESILIENT_TRY(toSges("iallgather", nRecvParts, recvParts, &sges));
      CollRequest* r = pool_.acquire();
      if (r == nullptr) {
        return {};
      }
      return handOut(r,
                     t_->iallgather(inner_, send, nRecvParts, sges.data(), window.bytesPerRank,
                                    window.offset, window.bytes, mhandleOf(sendRegion), &r->inner),
                     "iallgather", request);
    } else {
      return CollComm::iallgather(send, nRecvParts, recvParts, window, sendRegion, request);
    }
  }

  Status ireducescatter(int nSendParts, const CollPiece* sendParts, std::byte* recv,
                        CollWindow window, Reduction op, MemoryRegion* recvRegion,
                        Request** request) override {
    *request = nullptr;
    if constexpr (requires { t_->ireducescatter; }) {
      std::array<Sge, kMaxCollParts> sges{};
      RESILIENT_TRY(toSges("ireducescatter", nSendParts, sendParts, &sges));
      CollRequest* r = pool_.acquire();
      if (r == nullptr) {
        return {};
      }
      return handOut(r,
                     t_->ireducescatter(inner_, nSendParts, sges.data(), recv, window.bytesPerRank,
                                        window.offset, window.bytes, op.dataType, op.redOp,
                                        mhandleOf(recvRegion), &r->inner),
                     "ireducescatter", request);
    } else {
      return CollComm::ireducescatter(nSendParts, sendParts, recv, window, op, recvRegion, request);
    }
  }

  Status iflush(std::byte* data, int size, MemoryRegion* region, Request** request) override {
    *request = nullptr;
    CollRequest* r = pool_.acquire();
    if (r == nullptr) {
      return {};
    }
    return handOut(r, t_->iflush(inner_, data, size, mhandleOf(region), &r->inner), "iflush",
                   request);
  }

 private:
  // The plugin posted (r->inner set): hand r out; else r goes back.
  Status handOut(CollRequest* r, ncclResult_t result, const char* call, Request** request) {
    Status s = owner_.check(result, call);
    if (!s.ok() || r->inner == nullptr) {
      r->inner = nullptr;
      pool_.release(r);
      return s;
    }
    *request = r;
    return {};
  }

  // The typed pieces as the version's SGEs. v8's sizes are uint32_t and
  // NCCL's v8 adapter passes only one piece of at most 512 MiB
  // (src/plugin/net/net_v8.cc, ncclCollNet_iallgather); the same here.
  template <class Array>
  Status toSges(const char* call, int n, const CollPiece* parts, Array* out) const {
    if (n < 0 || n > kMaxCollParts) {
      return owner_.refuse(
          call, std::to_string(n) + " pieces (at most " + std::to_string(kMaxCollParts) + ")");
    }
    using Size = decltype(Sge{}.size);
    for (int i = 0; i < n; ++i) {
      if (std::is_same_v<Size, uint32_t> &&
          (n != 1 || parts[i].size > NCCL_COLLNET_LEGACY_MAX_SIZE)) {
        return owner_.refuse(call, "v8 takes one piece of at most 512 MiB");
      }
      Sge& sge = (*out)[static_cast<size_t>(i)];
      sge.mhandle = mhandleOf(parts[i].region);
      sge.address = parts[i].address;
      sge.size = static_cast<Size>(parts[i].size);
    }
    return {};
  }

  const CollNetBase& owner_;
  const T* t_;
  void* inner_;
  bool open_ = true;
  bool closeTried_ = false;
  RequestPool<CollRequest> pool_;
};

// ncclCollNet_vN_t as a CollNet (T: the version's table).
template <class T>
class CollShim final : public CollNetBase {
  using Props =
      std::remove_pointer_t<typename Signature<decltype(T::getProperties)>::template Param<1>>;
  // v11+: init(&ctx, commId, logger) per communicator; before, init(logger) once.
  static constexpr bool kContexts = Signature<decltype(T::init)>::kArity == 3;

 public:
  CollShim(const T* table, int version, ncclDebugLogger_t logger)
      : CollNetBase(table->name, version, logger), t_(table) {}

  Status initContext(uint64_t commId, std::unique_ptr<Context>* ctx) override {
    ctx->reset();
    if constexpr (kContexts) {
      void* inner = nullptr;
      RESILIENT_TRY(check(t_->init(&inner, commId, logger_), "init"));
      *ctx = std::make_unique<CollContext>(*this, t_->finalize, inner);
    } else {
      // NCCL's v6-v10 adapters init the plugin once (ncclCollNet_init's refCount).
      (void)commId;
      std::lock_guard<std::mutex> lock(mutex_);
      if (!initialised_) {
        RESILIENT_TRY(check(t_->init(logger_), "init"));
        initialised_ = true;
      }
    }
    // Required members, checked after init (a plugin may fill its table there).
    return requireMembers(name_, version_,
                          {{"devices", t_->devices != nullptr},
                           {"getProperties", t_->getProperties != nullptr},
                           {"listen", t_->listen != nullptr},
                           {"connect", t_->connect != nullptr},
                           {"reduceSupport", t_->reduceSupport != nullptr},
                           {"regMr", t_->regMr != nullptr},
                           {"deregMr", t_->deregMr != nullptr},
                           {"iallreduce", t_->iallreduce != nullptr},
                           {"iflush", t_->iflush != nullptr},
                           {"test", t_->test != nullptr},
                           {"closeColl", t_->closeColl != nullptr},
                           {"closeListen", t_->closeListen != nullptr}});
  }

  Status devices(int* ndev) override {
    *ndev = 0;
    return check(t_->devices(ndev), "devices");
  }

  // The fields the version's properties have, passed through unchanged
  // (propertiesOf, shim.h).
  Status properties(int dev, Properties* props) override {
    Props p{};
    RESILIENT_TRY(check(t_->getProperties(dev, &p), "getProperties"));
    *props = propertiesOf(p, [this](const char* text) { return keep(text); });
    return {};
  }

  Status listen(Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<CollListener>* listener) override {
    listener->reset();
    void* inner = nullptr;
    if constexpr (kContexts) {
      void* innerCtx = ctx != nullptr ? static_cast<CollContext*>(ctx)->inner() : nullptr;
      RESILIENT_TRY(check(t_->listen(innerCtx, dev, handle, &inner), "listen"));
    } else {
      (void)ctx;
      RESILIENT_TRY(check(t_->listen(dev, handle, &inner), "listen"));
    }
    *listener = std::make_unique<ExternalCollListener>(*this, t_->closeListen, inner);
    return {};
  }

  // Control path (once per comm): the handle array may be allocated.
  Status connect(std::byte* const* handles, int nranks, int rank, CollListener& listener,
                 std::unique_ptr<CollComm>* comm) override {
    comm->reset();
    std::vector<void*> innerHandles(handles, handles + std::max(nranks, 0));
    void* inner = nullptr;
    RESILIENT_TRY(check(t_->connect(innerHandles.data(), nranks, rank,
                                    static_cast<ExternalCollListener&>(listener).inner(), &inner),
                        "connect"));
    if (inner != nullptr) {  // NULL: no CollNet for this communicator (ncclTransportCollNetCheck)
      *comm = std::make_unique<ExternalCollComm<T>>(*this, t_, inner);
    }
    return {};
  }

  Status reduceSupport(Reduction op, int* supported) override {
    *supported = 0;
    return check(t_->reduceSupport(op.dataType, op.redOp, supported), "reduceSupport");
  }

  CollCapabilities capabilities() const noexcept override {
    CollCapabilities caps;
    caps.regMrDmaBuf = t_->regMrDmaBuf != nullptr;
    if constexpr (requires { t_->iallgather; }) {  // v8+
      caps.iallgather = t_->iallgather != nullptr;
      caps.ireducescatter = t_->ireducescatter != nullptr;
    }
    if constexpr (requires { t_->makeVDevice; }) {  // v9+
      caps.makeVDevice = t_->makeVDevice != nullptr;
    }
    return caps;
  }

  Status makeVDevice(const VirtualDevice& props, int* dev) override {
    if constexpr (requires { t_->makeVDevice; }) {
      if (t_->makeVDevice == nullptr) {
        return CollNet::makeVDevice(props, dev);
      }
      using VProps =
          std::remove_pointer_t<typename Signature<decltype(T::makeVDevice)>::template Param<1>>;
      VProps p{};
      constexpr int kDevs = static_cast<int>(sizeof p.devs / sizeof p.devs[0]);
      if (props.ndevs < 0 || props.ndevs > kDevs) {
        return refuse("makeVDevice", std::to_string(props.ndevs) + " devices (at most " +
                                         std::to_string(kDevs) + ")");
      }
      p.ndevs = props.ndevs;
      std::copy(props.devs, props.devs + props.ndevs, p.devs);
      return check(t_->makeVDevice(dev, &p), "makeVDevice");
    } else {
      return CollNet::makeVDevice(props, dev);
    }
  }

 private:
  const T* t_;
};

struct CollVersion {
  int version;
  const char* symbol;
  std::unique_ptr<CollNet> (*make)(const void* table, ncclDebugLogger_t logger);
};

template <class T, int V>
std::unique_ptr<CollNet> makeShim(const void* table, ncclDebugLogger_t logger) {
  return std::make_unique<CollShim<T>>(static_cast<const T*>(table), V, logger);
}

// Newest first: the first symbol found wins, as in NCCL's ncclNetPluginLoad.
constexpr std::array<CollVersion, 7> kCollVersions{{
    {12, kCollNetSymbols[0], &makeShim<ncclCollNet_v12_t, 12>},
    {11, kCollNetSymbols[1], &makeShim<ncclCollNet_v11_t, 11>},
    {10, kCollNetSymbols[2], &makeShim<ncclCollNet_v10_t, 10>},
    {9, kCollNetSymbols[3], &makeShim<ncclCollNet_v9_t, 9>},
    {8, kCollNetSymbols[4], &makeShim<ncclCollNet_v8_t, 8>},
    {7, kCollNetSymbols[5], &makeShim<ncclCollNet_v7_t, 7>},
    {6, kCollNetSymbols[6], &makeShim<ncclCollNet_v6_t, 6>},
}};

}  // namespace

Result<std::unique_ptr<CollNet>> loadExternalCollNet(void* library, int maxVersion,
                                                     ncclDebugLogger_t logger,
                                                     const std::string& path) {
  for (const CollVersion& v : kCollVersions) {
    const void* symbol = v.version <= maxVersion ? dlsym(library, v.symbol) : nullptr;
    if (symbol == nullptr) {
      continue;
    }
    // name and init are what NCCL reads at dlsym time (fact sheet §1); the
    // rest may be filled by init.
    const auto* head = static_cast<const ncclCollNet_v6_t*>(symbol);
    if (head->init == nullptr) {
      return invalidUsage(path + ": " + v.symbol + " has no init");
    }
    RES_INFO(NCCL_NET | NCCL_INIT, "inner CollNet %s (%s) from %s", displayName(head->name),
             v.symbol, path.c_str());
    return v.make(symbol, logger);
  }
  (void)dlerror();  // NOLINT(concurrency-mt-unsafe): clears this thread's dl error
  return std::unique_ptr<CollNet>();
}

int collNetAbiVersion(const CollNet& collNet) noexcept {
  const auto* external = dynamic_cast<const CollNetBase*>(&collNet);
  return external != nullptr ? external->version() : 0;
}

}  // namespace resilient::transport::external
