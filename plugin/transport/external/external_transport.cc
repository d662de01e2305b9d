#include "plugin/transport/external/external_transport.h"

#include <dlfcn.h>

#include <array>
#include <string>
#include <type_traits>
#include <utility>

#include "common/log.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {

LibraryHandle::~LibraryHandle() {
  if (handle_ != nullptr) {
    dlclose(handle_);
  }
}

LibraryHandle& LibraryHandle::operator=(LibraryHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) {
      dlclose(handle_);
    }
    handle_ = other.release();
  }
  return *this;
}

Status pluginStatus(ncclResult_t result, const std::string& plugin, int version, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) {
    return Status();
  }
  ErrorKind kind = ErrorKind::kInternal;
  switch (result) {
    case ncclSystemError: kind = ErrorKind::kSystem; break;
    case ncclRemoteError: kind = ErrorKind::kRemote; break;
    case ncclInvalidUsage:
    case ncclInvalidArgument: kind = ErrorKind::kInvalidUsage; break;
    default: break;
  }
  std::string message = "external net plugin " + plugin + " (ncclNetPlugin_v" +
                        std::to_string(version) + "): " + call + " returned " +
                        ncclResultName(result) + " (" + std::to_string(static_cast<int>(result)) +
                        ")";
  return Status::error(kind, std::move(message));
}

const char* displayName(const char* name) noexcept {
  return name != nullptr && name[0] != '\0' ? name : "(unnamed)";
}

Status requireMembers(const std::string& plugin, int version, const std::vector<Member>& members) {
  std::string missing;
  for (const Member& m : members) {
    if (!m.present) {
      missing += missing.empty() ? "" : ", ";
      missing += m.name;
    }
  }
  if (missing.empty()) {
    return Status();
  }
  return invalidUsage("external net plugin " + plugin + " (ncclNetPlugin_v" +
                      std::to_string(version) + ") leaves required members NULL: " + missing);
}

ExternalTransport::ExternalTransport(PluginBinding binding, const char* pluginName)
    : binding_(std::move(binding)), name_(displayName(pluginName)) {}

ExternalTransport::~ExternalTransport() {
  const int live = liveContexts();
  if (live > 0) {
    RES_WARN(NCCL_NET, "external net plugin %s unloaded with %d context(s) not finalized",
             name_.c_str(), live);
  }
}

bool ExternalTransport::exports(const char* symbol) const noexcept {
  return binding_.library.get() != nullptr && dlsym(binding_.library.get(), symbol) != nullptr;
}

int ExternalTransport::liveContexts() const noexcept {
  return liveContexts_.load(std::memory_order_relaxed);
}

void ExternalTransport::contextCreated(ExternalContext& ctx) noexcept {
  ctx.live_ = true;
  liveContexts_.fetch_add(1, std::memory_order_relaxed);
}

Status ExternalTransport::failure(ncclResult_t result, const char* call) const {
  return pluginStatus(result, name_, binding_.version, call);
}

Status ExternalTransport::refuse(const char* call, const std::string& why) const {
  return invalidUsage("external net plugin " + name_ + " (ncclNetPlugin_v" +
                      std::to_string(binding_.version) + "): " + call + ": " + why);
}

const char* ExternalTransport::keep(const char* text) {
  if (text == nullptr) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return strings_.emplace(text).first->c_str();
}

Status ExternalTransport::listen(Context* ctx, int dev, std::byte* handle,
                                 std::unique_ptr<Listener>* listener) {
  listener->reset();
  void* inner = nullptr;
  // Our contexts are the only ones listen gets (initContext made them).
  RESILIENT_TRY(innerListen(static_cast<ExternalContext*>(ctx), dev, handle, &inner));
  *listener = std::make_unique<ExternalListener>(*this, inner);
  return Status();
}

Status ExternalTransport::connect(Context* ctx, int dev, std::byte* handle,
                                  DeviceHandleRequest wantDeviceHandle,
                                  std::unique_ptr<SendComm>* comm) {
  comm->reset();
  void* inner = nullptr;
  DeviceHandle* deviceHandle = nullptr;
  RESILIENT_TRY(innerConnect(static_cast<ExternalContext*>(ctx), dev, handle, wantDeviceHandle,
                             &inner, &deviceHandle));
  if (inner != nullptr) {
    // The pool's size follows the device's largest grouped receive (the
    // plugin's own limit; the largest NCCL groups when it cannot tell).
    Properties props;
    props.maxRecvs = kMaxRecvN;
    if (!properties(dev, &props).ok()) {
      props.maxRecvs = kMaxRecvN;
    }
    *comm = std::make_unique<ExternalSendComm>(*this, inner, deviceHandle, props.maxRecvs);
  }
  return Status();
}

// ---- ExternalContext -------------------------------------------------------

ExternalContext::ExternalContext(ExternalTransport& transport,
                                 const CommConfig& commConfig) noexcept
    : transport_(transport) {
  config.trafficClass = commConfig.trafficClass;
}

ExternalContext::~ExternalContext() {
  (void)finalize();
}

Status ExternalContext::finalize() {
  if (!live_) {
    return Status();
  }
  live_ = false;
  transport_.liveContexts_.fetch_sub(1, std::memory_order_relaxed);
  return transport_.innerFinalize(*this);
}

// ---- ExternalRequest -------------------------------------------------------

Status ExternalRequest::test(int* done, int* sizes) {
  RESILIENT_TRY(transport_->innerTest(inner_, done, sizes));
  if (*done != 0 && !heldUntilConsumed_) {
    inner_ = nullptr;
    pool_->release(this);
  }
  return Status();
}

// ---- ExternalComm ----------------------------------------------------------

template <class Base>
ExternalComm<Base>::ExternalComm(ExternalTransport& transport, void* inner,
                                 DeviceHandle* deviceHandle, size_t poolSize)
    : transport_(transport), inner_(inner), deviceHandle_(deviceHandle), pool_(poolSize) {
  for (ExternalRequest& r : pool_.slots()) {
    r.transport_ = &transport_;
    r.pool_ = &pool_;
  }
}

template <class Base>
ExternalComm<Base>::~ExternalComm() {
  if (!closeTried_) {
    (void)close();
  }
}

template <class Base>
Status ExternalComm<Base>::regMr(std::byte* data, size_t size, int type,
                                 std::unique_ptr<MemoryRegion>* region) {
  region->reset();
  void* mhandle = nullptr;
  RESILIENT_TRY(transport_.innerRegMr(inner_, data, size, type, &mhandle));
  *region = std::make_unique<ExternalRegion>(mhandle);
  return Status();
}

template <class Base>
Status ExternalComm<Base>::regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset,
                                       int fd, std::unique_ptr<MemoryRegion>* region) {
  region->reset();
  void* mhandle = nullptr;
  RESILIENT_TRY(transport_.innerRegMrDmaBuf(inner_, data, size, type, offset, fd, &mhandle));
  *region = std::make_unique<ExternalRegion>(mhandle);
  return Status();
}

template <class Base>
Status ExternalComm<Base>::getDeviceMr(MemoryRegion* region, DeviceRegion** deviceRegion) {
  *deviceRegion = nullptr;
  void* dptr = nullptr;
  RESILIENT_TRY(transport_.innerGetDeviceMr(
      inner_, region != nullptr ? static_cast<ExternalRegion*>(region)->mhandle() : nullptr,
      &dptr));
  *deviceRegion = static_cast<DeviceRegion*>(dptr);
  return Status();
}

template <class Base>
Status ExternalComm<Base>::deregMr(std::unique_ptr<MemoryRegion> region) {
  if (region == nullptr) {
    return Status();
  }
  // Regions of this transport are ExternalRegions (regMr above made them).
  return transport_.innerDeregMr(inner_, static_cast<ExternalRegion*>(region.get())->mhandle());
}

template <class Base>
Status ExternalComm<Base>::close() {
  if (!open_) {
    return Status();
  }
  closeTried_ = true;
  Status s;
  if constexpr (std::is_same_v<Base, SendComm>) {
    s = transport_.innerCloseSend(inner_);
  } else {
    s = transport_.innerCloseRecv(inner_);
  }
  open_ = !s.ok();  // the caller may try again, as it could call closeSend again
  return s;
}

template <class Base>
ExternalRequest* ExternalComm<Base>::acquire(bool heldUntilConsumed) noexcept {
  ExternalRequest* r = pool_.acquire();
  if (r != nullptr) {
    r->inner_ = nullptr;
    r->heldUntilConsumed_ = heldUntilConsumed;
  }
  return r;
}

template <class Base>
Request* ExternalComm<Base>::handOut(ExternalRequest* r) noexcept {
  if (r->inner_ == nullptr) {  // the plugin cannot post now, or has nothing to do
    pool_.release(r);
    return nullptr;
  }
  return r;
}

template class ExternalComm<SendComm>;
template class ExternalComm<RecvComm>;

namespace {

// The plugin's mhandle of a region of ours (nullptr: none).
void* mhandleOf(MemoryRegion* region) noexcept {
  return region != nullptr ? static_cast<ExternalRegion*>(region)->mhandle() : nullptr;
}

}  // namespace

// ---- ExternalSendComm ------------------------------------------------------

Status ExternalSendComm::isend(std::byte* data, size_t size, int tag, MemoryRegion* region,
                               ProfilerHandle* phandle, Request** request) {
  *request = nullptr;
  ExternalRequest* r = acquire(false);
  if (r == nullptr) {
    return Status();  // every request is out: retry, as with a plugin that cannot post
  }
  Status s = transport_.innerIsend(inner_, data, size, tag, mhandleOf(region), phandle, &r->inner_);
  if (!s.ok()) {
    r->inner_ = nullptr;
  }
  *request = handOut(r);
  return s;
}

// ---- ExternalRecvComm ------------------------------------------------------

ExternalRecvComm::ExternalRecvComm(ExternalTransport& transport, void* inner,
                                   DeviceHandle* deviceHandle)
    : ExternalComm(transport, inner, deviceHandle, kPoolSize),
      consumes_(transport.capabilities().irecvConsumed) {}

Status ExternalRecvComm::irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
                               MemoryRegion** regions, ProfilerHandle** phandles,
                               Request** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvN) {
    return transport_.refuse(
        "irecv", "n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRecvN));
  }
  ExternalRequest* r = acquire(consumes_);
  if (r == nullptr) {
    return Status();
  }
  // The ABI's untyped arrays (the first n entries only: not zeroed, the data path).
  std::array<void*, kMaxRecvN> ownData;
  std::array<void*, kMaxRecvN> ownMhandles;
  std::array<void*, kMaxRecvN> ownPhandles;
  for (int i = 0; i < n; ++i) {
    ownData[i] = data[i];
    ownMhandles[i] = regions != nullptr ? mhandleOf(regions[i]) : nullptr;
    ownPhandles[i] = phandles != nullptr ? phandles[i] : nullptr;
  }
  Status s = transport_.innerIrecv(inner_, n, ownData.data(), sizes, tags,
                                   regions != nullptr ? ownMhandles.data() : nullptr,
                                   phandles != nullptr ? ownPhandles.data() : nullptr, &r->inner_);
  if (!s.ok()) {
    r->inner_ = nullptr;
  }
  *request = handOut(r);
  return s;
}

Status ExternalRecvComm::iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                                Request** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvN) {
    return transport_.refuse(
        "iflush", "n = " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRecvN));
  }
  ExternalRequest* r = acquire(false);
  if (r == nullptr) {
    return Status();
  }
  std::array<void*, kMaxRecvN> ownData;
  std::array<void*, kMaxRecvN> ownMhandles;
  for (int i = 0; i < n; ++i) {
    ownData[i] = data[i];
    ownMhandles[i] = regions != nullptr ? mhandleOf(regions[i]) : nullptr;
  }
  Status s = transport_.innerIflush(inner_, n, ownData.data(), sizes,
                                    regions != nullptr ? ownMhandles.data() : nullptr, &r->inner_);
  if (!s.ok()) {
    r->inner_ = nullptr;
  }
  *request = handOut(r);
  return s;
}

Status ExternalRecvComm::irecvConsumed(int n, Request* request) {
  if (!consumes_ || request == nullptr) {
    return Status();
  }
  // Requests NCCL passes back are this comm's (irecv above handed them out).
  auto* r = static_cast<ExternalRequest*>(request);
  Status s = transport_.innerIrecvConsumed(inner_, n, r->inner_);
  if (s.ok() && r->heldUntilConsumed_) {
    r->inner_ = nullptr;
    pool_.release(r);
  }
  return s;
}

// ---- ExternalListener ------------------------------------------------------

ExternalListener::~ExternalListener() {
  if (!closeTried_) {
    (void)close();
  }
}

Status ExternalListener::accept(DeviceHandleRequest wantDeviceHandle,
                                std::unique_ptr<RecvComm>* comm) {
  comm->reset();
  void* inner = nullptr;
  DeviceHandle* deviceHandle = nullptr;
  RESILIENT_TRY(transport_.innerAccept(inner_, wantDeviceHandle, &inner, &deviceHandle));
  if (inner != nullptr) {
    *comm = std::make_unique<ExternalRecvComm>(transport_, inner, deviceHandle);
  }
  return Status();
}

Status ExternalListener::close() {
  if (!open_) {
    return Status();
  }
  closeTried_ = true;
  Status s = transport_.innerCloseListen(inner_);
  open_ = !s.ok();
  return s;
}

}  // namespace resilient::transport::external
