// The external inner transport: another NCCL net plugin .so, driven through
// the newest ABI version it exports (ncclNetPlugin_v12 down to _v6).
//
// ExternalTransport is the version-neutral face; one small shim per ABI
// version (adapt_v6.cc ... adapt_v12.cc) derives from it and maps that
// version's calls onto the newest-ABI-shaped semantics of transport.h, the
// way NCCL's core adapts old plugins. Create one with loadExternalPlugin
// (loader.h).
//
// This is NCCL's ABI edge, where untyped pointers stay: the typed objects
// here each hold the inner plugin's own void* and pass it through unchanged.
// An ExternalListener, ExternalSendComm or ExternalRecvComm holds the
// plugin's comm; each comm owns a fixed pool of ExternalRequests (made with
// the comm), each holding the plugin's request while it is out; regMr
// returns an ExternalRegion holding the plugin's mhandle. Our
// ExternalContext keeps the CommConfig and, from v11, the plugin's context.
//
// Caveats the resilient layer above must know:
// - connect(): NCCL's own socket and IB plugins keep their connection state
//   inside the handle buffer and write to it between polls; the handle is
//   passed on as given (writable and stable across the polls of one
//   connection, as transport.h requires of every caller).
// - handleBytes() is kHandleSize: no plugin says how many handle bytes it
//   uses. The resilient layer checks which trailing bytes stay zero after
//   listen() before it stores anything of its own there.
// - Errors are whatever the inner plugin returns; a comm that failed once is
//   not made sticky here (the resilient layer tracks its comms and requests).
// - With a plugin that has irecvConsumed, a completed receive's request
//   stays out of its pool until RecvComm::irecvConsumed passes it on.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/status.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/result.h"
#include "plugin/transport/collnet.h"
#include "plugin/transport/request_pool.h"
#include "plugin/transport/transport.h"

namespace resilient::transport::external {

// The oldest and newest net plugin ABI versions we drive.
inline constexpr int kOldestVersion = 6;
inline constexpr int kNewestVersion = 12;

// Largest n of a grouped irecv we pass on (NCCL's MAXCHANNELS bound).
inline constexpr int kMaxRecvN = NCCL_PROXY_MAX_SUBS;

// Owns a dlopen handle; dlclose on destruction.
class LibraryHandle {
 public:
  LibraryHandle() noexcept = default;
  explicit LibraryHandle(void* handle) noexcept : handle_(handle) {}
  ~LibraryHandle();
  LibraryHandle(LibraryHandle&& other) noexcept : handle_(other.release()) {}
  LibraryHandle& operator=(LibraryHandle&& other) noexcept;
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;

  void* get() const noexcept { return handle_; }
  void* release() noexcept {
    void* h = handle_;
    handle_ = nullptr;
    return h;
  }

 private:
  void* handle_ = nullptr;
};

// What the loader hands to a version shim.
struct PluginBinding {
  LibraryHandle library;
  std::string spec;                    // as configured (NCCL_RESILIENT_INNER)
  std::string path;                    // the library actually loaded (resolved path)
  int version = 0;                     // N of the ncclNetPlugin_vN found
  const void* symbol = nullptr;        // that ncclNetPlugin_vN struct, inside the library
  ncclDebugLogger_t logger = nullptr;  // never null
  ncclProfilerCallback_t profilerCallback = nullptr;  // never null
};

// The one translation of an inner plugin's ncclResult_t into a Status:
// ncclSystemError -> kSystem, ncclRemoteError -> kRemote, ncclInvalidUsage and
// ncclInvalidArgument -> kInvalidUsage, any other code -> kInternal. The
// message names the plugin, its ABI version and the call. ncclSuccess, and
// ncclInProgress (which NCCL's own checks also take for success), give ok.
Status pluginStatus(ncclResult_t result, const std::string& plugin, int version, const char* call);

class ExternalTransport;

// Our per-communicator context, whatever the version: the config NCCL gives
// v11 init (v10 wants it at connect) and, from v11, the plugin's own context.
// Heap-allocated so that the config a plugin may keep a pointer to lives
// until finalize.
class ExternalContext final : public Context {
 public:
  ExternalContext(ExternalTransport& transport, const CommConfig& commConfig) noexcept;
  // Finalizes a context that was not (status ignored).
  ~ExternalContext() override;
  ExternalContext(const ExternalContext&) = delete;
  ExternalContext& operator=(const ExternalContext&) = delete;

  // The plugin's finalize (v11+) once; later calls do nothing.
  Status finalize() override;

  ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  void* inner = nullptr;  // the v11+ plugin's ctx; unused before v11

 private:
  friend class ExternalTransport;
  ExternalTransport& transport_;
  bool live_ = false;  // counted in liveContexts() and not finalized yet
};

// One registration: the plugin's mhandle (may be NULL for plugins that need none).
class ExternalRegion final : public MemoryRegion {
 public:
  explicit ExternalRegion(void* mhandle) noexcept : mhandle_(mhandle) {}
  void* mhandle() const noexcept { return mhandle_; }

 private:
  void* mhandle_;
};

// One of a comm's pool: the plugin's request while it is out.
class ExternalRequest final : public Request {
 public:
  // The plugin's test; once done the request goes back to its pool, except a
  // receive of a plugin with irecvConsumed, which waits for that call.
  Status test(int* done, int* sizes) override;

 private:
  template <class Base>
  friend class ExternalComm;
  friend class ExternalSendComm;
  friend class ExternalRecvComm;

  ExternalTransport* transport_ = nullptr;
  RequestPool<ExternalRequest>* pool_ = nullptr;
  void* inner_ = nullptr;
  bool heldUntilConsumed_ = false;
};

// What the send and receive comms share: the plugin's comm and the pool.
template <class Base>
class ExternalComm : public Base {
 public:
  ~ExternalComm() override;
  ExternalComm(const ExternalComm&) = delete;
  ExternalComm& operator=(const ExternalComm&) = delete;

  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<MemoryRegion>* region) override;
  Status regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset, int fd,
                     std::unique_ptr<MemoryRegion>* region) override;
  Status deregMr(std::unique_ptr<MemoryRegion> region) override;
  Status getDeviceMr(MemoryRegion* region, DeviceRegion** deviceRegion) override;
  DeviceHandle* deviceHandle() const noexcept override { return deviceHandle_; }
  // closeSend / closeRecv of the plugin, which frees what is still posted.
  // When the plugin fails it, close() may be called again (the plugin's
  // close is called again); destruction then does not retry.
  Status close() override;

 protected:
  ExternalComm(ExternalTransport& transport, void* inner, DeviceHandle* deviceHandle,
               size_t poolSize);

  // A request of the pool for the plugin to fill in; nullptr when all are out.
  ExternalRequest* acquire(bool heldUntilConsumed) noexcept;
  // Hands out `r` when the plugin posted (r->inner_ set), else puts it back.
  Request* handOut(ExternalRequest* r) noexcept;

  ExternalTransport& transport_;
  void* inner_;
  DeviceHandle* deviceHandle_;  // the plugin's, from connect/accept (may be nullptr)
  bool open_ = true;         // not closed successfully yet
  bool closeTried_ = false;  // close() was called
  RequestPool<ExternalRequest> pool_;
};

class ExternalSendComm final : public ExternalComm<SendComm> {
 public:
  // Requests: NCCL keeps at most NCCL_NET_MAX_REQUESTS (kMaxRequests) per
  // comm, but a sender posts one isend per receive of the peer's grouped
  // irecv (up to the device's maxRecvs, at most kMaxRecvN), all on this comm.
  static size_t poolSize(int maxRecvs) noexcept {
    return static_cast<size_t>(kMaxRequests) *
           static_cast<size_t>(std::clamp(maxRecvs, 1, kMaxRecvN));
  }

  ExternalSendComm(ExternalTransport& transport, void* inner, DeviceHandle* deviceHandle,
                   int maxRecvs)
      : ExternalComm(transport, inner, deviceHandle, poolSize(maxRecvs)) {}

  Status isend(std::byte* data, size_t size, int tag, MemoryRegion* region, ProfilerHandle* phandle,
               Request** request) override;
};

class ExternalRecvComm final : public ExternalComm<RecvComm> {
 public:
  // Requests: kMaxRequests receives (a grouped irecv counts once) and a flush
  // for each, which NCCL's proxy posts while a receive still waits for its
  // irecvConsumed (src/transport/net.cc, recvProxyProgress).
  static constexpr size_t kPoolSize = 2 * static_cast<size_t>(kMaxRequests);

  ExternalRecvComm(ExternalTransport& transport, void* inner, DeviceHandle* deviceHandle);

  Status irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
               MemoryRegion** regions, ProfilerHandle** phandles, Request** request) override;
  Status iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                Request** request) override;
  // The plugin's irecvConsumed with the plugin's request, which then goes
  // back to the pool; nothing without one.
  Status irecvConsumed(int n, Request* request) override;

 private:
  bool consumes_;  // the plugin has irecvConsumed
};

class ExternalListener final : public Listener {
 public:
  ExternalListener(ExternalTransport& transport, void* inner) noexcept
      : transport_(transport), inner_(inner) {}
  ~ExternalListener() override;
  ExternalListener(const ExternalListener&) = delete;
  ExternalListener& operator=(const ExternalListener&) = delete;

  Status accept(DeviceHandleRequest wantDeviceHandle, std::unique_ptr<RecvComm>* comm) override;
  // closeListen of the plugin; as ExternalComm::close when that fails.
  Status close() override;

 private:
  ExternalTransport& transport_;
  void* inner_;
  bool open_ = true;
  bool closeTried_ = false;
};

class ExternalTransport : public Transport {
 public:
  ~ExternalTransport() override;
  ExternalTransport(const ExternalTransport&) = delete;
  ExternalTransport& operator=(const ExternalTransport&) = delete;

  // Wrap what the shim's plugin calls return in the objects above.
  Status listen(Context* ctx, int dev, std::byte* handle,
                std::unique_ptr<Listener>* listener) final;
  Status connect(Context* ctx, int dev, std::byte* handle, DeviceHandleRequest wantDeviceHandle,
                 std::unique_ptr<SendComm>* comm) final;

  // The inner plugin's name field ("IB", "AWS Libfabric", ...).
  const char* name() const noexcept override { return name_.c_str(); }
  // See the caveat above: every byte may be the plugin's.
  size_t handleBytes() const noexcept override { return kHandleSize; }

  // N of the ncclNetPlugin_vN symbol in use.
  int abiVersion() const noexcept { return binding_.version; }
  // The library file loaded (symlinks resolved).
  const std::string& libraryPath() const noexcept { return binding_.path; }
  // Whether the library exports `symbol` (another plugin kind NCCL looks up
  // in the net plugin's library, plugin/net/not_wrapped.h).
  bool exports(const char* symbol) const noexcept;
  // Contexts created by initContext and not finalized yet.
  int liveContexts() const noexcept;

  // The library's ncclCollNetPlugin_vN (external_collnet.h), or nullptr.
  CollNet* collNet() noexcept override { return collNet_.get(); }
  // The loader hands over the CollNet it found in the same library.
  void adoptCollNet(std::unique_ptr<CollNet> collNet) noexcept { collNet_ = std::move(collNet); }

 protected:
  explicit ExternalTransport(PluginBinding binding, const char* pluginName);

  // ok for ncclSuccess; otherwise pluginStatus(...) for `call`. Inline fast path.
  Status check(ncclResult_t result, const char* call) const {
    if (result == ncclSuccess) {
      return Status();
    }
    return failure(result, call);
  }
  // invalidUsage naming the plugin and the call.
  Status refuse(const char* call, const std::string& why) const;

  // A copy of `text` that lives as long as this transport (Properties
  // strings); nullptr stays nullptr.
  const char* keep(const char* text);

  ncclDebugLogger_t logger() const noexcept { return binding_.logger; }
  ncclProfilerCallback_t profilerCallback() const noexcept { return binding_.profilerCallback; }
  const std::string& pluginName() const noexcept { return name_; }

  // Counts `ctx` in liveContexts() (a shim's initContext, on success); its
  // finalize or destruction takes it out again.
  void contextCreated(ExternalContext& ctx) noexcept;

  // The plugin's calls of the shim's version on the plugin's own pointers
  // (the objects above call them). Shim<Net> (shim.h) implements all but
  // innerConnect and innerFinalize, which each version's shim adds.
  virtual Status innerListen(ExternalContext* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual Status innerConnect(ExternalContext* ctx, int dev, void* handle,
                              DeviceHandleRequest wantDeviceHandle, void** sendComm,
                              DeviceHandle** deviceHandle) = 0;
  virtual Status innerAccept(void* listenComm, DeviceHandleRequest wantDeviceHandle,
                             void** recvComm, DeviceHandle** deviceHandle) = 0;
  virtual Status innerRegMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual Status innerRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                  int fd, void** mhandle) = 0;
  virtual Status innerGetDeviceMr(void* comm, void* mhandle, void** deviceRegion) = 0;
  virtual Status innerDeregMr(void* comm, void* mhandle) = 0;
  virtual Status innerIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                            void* phandle, void** request) = 0;
  virtual Status innerIrecv(void* recvComm, int n, void** data, const size_t* sizes,
                            const int* tags, void** mhandles, void** phandles, void** request) = 0;
  virtual Status innerIflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                             void** request) = 0;
  virtual Status innerTest(void* request, int* done, int* sizes) = 0;
  virtual Status innerIrecvConsumed(void* recvComm, int n, void* request) = 0;
  virtual Status innerCloseSend(void* sendComm) = 0;
  virtual Status innerCloseRecv(void* recvComm) = 0;
  virtual Status innerCloseListen(void* listenComm) = 0;
  // The plugin's finalize of a live context (v11+; nothing before).
  virtual Status innerFinalize(ExternalContext& ctx) = 0;

 private:
  friend class ExternalContext;
  friend class ExternalRequest;
  template <class Base>
  friend class ExternalComm;
  friend class ExternalSendComm;
  friend class ExternalRecvComm;
  friend class ExternalListener;

  Status failure(ncclResult_t result, const char* call) const;

  PluginBinding binding_;
  std::string name_;
  mutable std::mutex mutex_;
  std::set<std::string> strings_;  // node-based: pointers stay valid
  std::atomic<int> liveContexts_{0};
  // After binding_: destroyed before the library is closed.
  std::unique_ptr<CollNet> collNet_;
};

}  // namespace resilient::transport::external
