// The inner transport seam of the net plugin: what the resilient layer wraps.
//
// One version-neutral interface with the semantics of NCCL's newest net ABI
// (docs/reference/nccl-abi.md §1.5 and §1.8) in owned, typed C++ objects:
// a Transport makes Listeners and SendComms, a Listener accepts RecvComms,
// and each comm owns its Requests (a fixed pool, request_pool.h) and makes
// its MemoryRegions. Every call returns a Status instead of an ncclResult_t;
// sizes are size_t. NCCL's untyped pointers are turned into these objects at
// the two edges only: the net plugin's ABI adapters (plugin/net/abi/) and the
// adapter of another plugin .so (plugin/transport/external/). Implementations
// mirror each other's file names: tcp/ (our own TCP), external/ (another NCCL
// net plugin .so, loaded through its own ABI version), fault/ (a decorator
// injecting faults) and raw/ (the tools' TCP baseline).
//
// Contract (what NCCL, and therefore the resilient layer, relies on):
// - No call blocks. connect/accept return ok with an empty pointer to be
//   polled again; isend/irecv/iflush return ok with *request == nullptr for
//   "cannot post now, retry".
// - Calls on one comm come from one thread at a time (NCCL's proxy threads),
//   calls on different comms may run concurrently.
// - connect() gets the caller's handle buffer, writable and the same across
//   the polls of one connection: NCCL's own socket and IB plugins keep their
//   connect state in it between polls.
// - A failed comm stays failed: every later call on it returns an error.
// - Request::test() reports done once; the request then goes back to its
//   comm and must not be used again (irecvConsumed excepted, see there).
// - close() releases what the object holds and says whether that went well;
//   destroying an object that was not closed closes it, ignoring the status.
//   A Transport outlives every object it made; a Listener does not need to
//   outlive the comms it accepted; a comm outlives its requests and regions
//   (NCCL deregisters before it closes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "common/status.h"

namespace resilient::transport {

// Bytes of the opaque listen handle NCCL exchanges between the two sides.
inline constexpr size_t kHandleSize = 128;
// Outstanding requests NCCL may have per comm (NCCL_NET_MAX_REQUESTS).
inline constexpr int kMaxRequests = 32;

// Memory types of regMr and of Properties::ptrSupport (NCCL_PTR_*).
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;

// The largest number of physical devices one fused device holds (v12: 8;
// v9 to v11: 4).
inline constexpr int kMaxFusedDevices = 8;

// A virtual device: the physical devices fused into it (NCCL's vProps).
struct VirtualDevice {
  int ndevs = 0;
  int devs[kMaxFusedDevices] = {};
};

// What a transport offers beyond the calls every one has: NCCL's optional
// members, each offered to NCCL by the resilient layer exactly when the
// inner transport has it. Known once the first context is initialised (a
// plugin may fill its table in init).
struct Capabilities {
  bool regMrDmaBuf = false;    // GPU memory registered by DMA-BUF fd
  bool getDeviceMr = false;    // device offload: a region's device-side handle
  bool irecvConsumed = false;  // device offload: receives held until consumed
  bool makeVDevice = false;    // NIC fusion
  bool setNetAttr = false;     // traffic hints (v11+)
};

// NCCL's opaque objects that a transport passes between NCCL and the device
// code it offloads to, never read by the resilient layer: the device handle
// connect/accept return (ncclNetDeviceHandle_vN_t, v7+), a region's device
// handle (getDeviceMr) and the traffic attributes of setNetAttr
// (ncclNetAttr_v11_t, the same in v12).
struct DeviceHandle;
struct DeviceRegion;
struct NetAttributes;

// The device-handle out-pointer of connect/accept as NCCL passes it: whether
// there is one (none in v6; NCCL passes one from v7), and what it points at.
// That is NULL, or for an UNPACK receive a handle NCCL allocated (type and
// version filled in) which the plugin fills in (src/transport/net.cc,
// ncclNetGetDeviceHandle): the inner plugin must get that very pointer.
// From bool for the transports and tests that only say whether.
struct DeviceHandleRequest {
  DeviceHandleRequest(bool want) noexcept : wanted(want) {}  // NOLINT(google-explicit-constructor)
  // An out-pointer that points at `pointee` (NULL or the caller's handle).
  static DeviceHandleRequest pointingAt(DeviceHandle* pointee) noexcept {
    DeviceHandleRequest r(true);
    r.handle = pointee;
    return r;
  }
  explicit operator bool() const noexcept { return wanted; }

  bool wanted = false;
  DeviceHandle* handle = nullptr;
};

// One device as the transport describes it. The strings are owned by the
// transport and stay valid until it is destroyed.
struct Properties {
  const char* name = nullptr;
  const char* pciPath = nullptr;  // sysfs path of the PCI device, or nullptr (virtual)
  uint64_t guid = 0;
  int ptrSupport = kPtrHost;
  int regIsGlobal = 0;
  int forceFlush = 0;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 65536;
  int maxRecvs = 1;        // largest n of a grouped irecv
  size_t maxP2pBytes = 0;  // largest single transfer
  size_t maxCollBytes = 0;
  // The device's rail and plane (v12; -1: not known), for NCCL's topology.
  int railId = -1;
  int planeId = -1;
  // Device offload (v7+): NCCL_NET_DEVICE_HOST (0) for a host transport, or
  // the kind of device-side code the transport's comms need (UNPACK: the GPU
  // unpacks what the host-driven receive put in bounce buffers).
  int netDeviceType = 0;
  int netDeviceVersion = 0;
  // The physical devices a virtual (fused) device is made of (v9+; a
  // physical device lists itself). ndevs 0: not reported (<= v8).
  VirtualDevice vProps;
  int maxMultiRequestSize = 1;  // v11+
};

// Per-communicator settings NCCL hands to init (v11) or connect (v10).
struct CommConfig {
  int trafficClass = -1;  // -1: undefined
};

// An address as text: "10.0.0.2:40000" or "[fe80::1]:40000"; empty when unknown.
struct Endpoint {
  char text[64] = {};
};

// NCCL's profiler handle of one request (v9+), passed through untouched to
// the transport that reports to NCCL's profiler; never defined.
struct ProfilerHandle;

// Per-communicator state of a transport (NCCL v11 init/finalize).
class Context {
 public:
  virtual ~Context() = default;
  virtual Status finalize() = 0;
};

// One registration of memory with a comm (regMr). Owned by whoever holds the
// unique_ptr until Comm::deregMr takes it back.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
};

// One posted send, receive or flush, owned by its comm.
class Request {
 public:
  // sizes: nullptr, or 1 (send) / n (receive) ints that receive the sizes.
  // Once it reports *done = 1 the request belongs to its comm again.
  virtual Status test(int* done, int* sizes) = 0;

 protected:
  ~Request() = default;
};

// What send and receive comms share.
class Comm {
 public:
  virtual ~Comm() = default;

  virtual Status regMr(std::byte* data, size_t size, int type,
                       std::unique_ptr<MemoryRegion>* region) = 0;
  virtual Status deregMr(std::unique_ptr<MemoryRegion> region) = 0;
  virtual Status close() = 0;

  // Optional calls (Capabilities): called only where the transport offers them.
  // DMA-BUF registration: the fd and offset of `data`'s dmabuf (the caller
  // keeps the fd open only for the call).
  virtual Status regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset, int fd,
                             std::unique_ptr<MemoryRegion>* region) {
    (void)data, (void)size, (void)type, (void)offset, (void)fd;
    region->reset();
    return invalidUsage("regMrDmaBuf: this transport has no DMA-BUF registration");
  }
  // The device-side handle of a region (device offload).
  virtual Status getDeviceMr(MemoryRegion* region, DeviceRegion** deviceRegion) {
    (void)region;
    *deviceRegion = nullptr;
    return invalidUsage("getDeviceMr: this transport has no device offload");
  }
  // The device handle connect/accept produced (nullptr for a host comm, or
  // when the caller asked for none).
  virtual DeviceHandle* deviceHandle() const noexcept { return nullptr; }

  // Optional observations the resilient layer uses when the transport has them.
  // Bytes moved so far (both directions); monotonic. Comms that cannot tell
  // return false and the layer counts completed requests instead.
  virtual bool bytesMoved(uint64_t* bytes) noexcept {
    (void)bytes;
    return false;
  }
  // The local and peer addresses, when the transport knows them.
  virtual bool endpoints(Endpoint* local, Endpoint* peer) noexcept {
    (void)local;
    (void)peer;
    return false;
  }
};

class SendComm : public Comm {
 public:
  // phandle: NCCL's profiler handle (may be nullptr).
  virtual Status isend(std::byte* data, size_t size, int tag, MemoryRegion* region,
                       ProfilerHandle* phandle, Request** request) = 0;
  // Whether bytes the network has not taken yet wait on this comm now (the
  // watchdog samples it at each tick: the share of time a link is backlogged
  // is how long it was the limit; jobhealth/slow_links.h). Comms that cannot
  // tell return false and the resilient layer samples whether requests are
  // outstanding instead.
  virtual bool linkBacklogged(bool* backlogged) noexcept {
    (void)backlogged;
    return false;
  }
};

class RecvComm : public Comm {
 public:
  virtual Status irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
                       MemoryRegion** regions, ProfilerHandle** phandles, Request** request) = 0;
  virtual Status iflush(int n, std::byte** data, const int* sizes, MemoryRegion** regions,
                        Request** request) = 0;
  // irecvConsumed (v7+, optional, Capabilities::irecvConsumed): NCCL calls it
  // once per completed receive, in order, with that receive's request after
  // its test() said done, once the data was consumed; a comm with it keeps
  // such a request until then. Does nothing on comms without it.
  virtual Status irecvConsumed(int n, Request* request) {
    (void)n;
    (void)request;
    return {};
  }
};

// A send or receive comm whose calls common to both directions (regMr,
// deregMr, close, bytesMoved, endpoints) are those of the State it holds:
// how a transport whose two comms share their state writes them once.
// Direction: SendComm or RecvComm.
template <class Direction, class State>
class CommOver : public Direction {
 public:
  template <class... Args>
  explicit CommOver(Args&&... args) : state(std::forward<Args>(args)...) {}

  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<MemoryRegion>* region) override {
    return state.regMr(data, size, type, region);
  }
  Status deregMr(std::unique_ptr<MemoryRegion> region) override {
    return state.deregMr(std::move(region));
  }
  Status close() override { return state.close(); }
  // The optional calls: the State's where it has them.
  Status regMrDmaBuf(std::byte* data, size_t size, int type, uint64_t offset, int fd,
                     std::unique_ptr<MemoryRegion>* region) override {
    if constexpr (requires { state.regMrDmaBuf(data, size, type, offset, fd, region); }) {
      return state.regMrDmaBuf(data, size, type, offset, fd, region);
    } else {
      return Direction::regMrDmaBuf(data, size, type, offset, fd, region);
    }
  }
  Status getDeviceMr(MemoryRegion* region, DeviceRegion** deviceRegion) override {
    if constexpr (requires { state.getDeviceMr(region, deviceRegion); }) {
      return state.getDeviceMr(region, deviceRegion);
    } else {
      return Direction::getDeviceMr(region, deviceRegion);
    }
  }
  DeviceHandle* deviceHandle() const noexcept override {
    if constexpr (requires { state.deviceHandle(); }) {
      return state.deviceHandle();
    } else {
      return nullptr;
    }
  }
  bool bytesMoved(uint64_t* bytes) noexcept override { return state.bytesMoved(bytes); }
  bool endpoints(Endpoint* local, Endpoint* peer) noexcept override {
    return state.endpoints(local, peer);
  }

  State state;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // *comm stays empty while no connection is ready (poll again).
  // wantDeviceHandle: whether the caller takes a device handle, and the one
  // it allocated, if any (DeviceHandleRequest); the comm's deviceHandle()
  // then says it.
  virtual Status accept(DeviceHandleRequest wantDeviceHandle, std::unique_ptr<RecvComm>* comm) = 0;
  virtual Status close() = 0;
};

class CollNet;

class Transport {
 public:
  virtual ~Transport() = default;

  // Short name for logs ("tcp", or the wrapped plugin's name).
  virtual const char* name() const noexcept = 0;

  // Per-communicator context (NCCL v11 init). Transports without
  // per-communicator state leave *ctx empty; listen and connect then get nullptr.
  virtual Status initContext(uint64_t commId, const CommConfig& config,
                             std::unique_ptr<Context>* ctx) = 0;

  virtual Status devices(int* ndev) = 0;
  virtual Status properties(int dev, Properties* props) = 0;

  // Bytes of the listen handle this transport writes (<= kHandleSize). The
  // resilient layer uses the bytes after it.
  virtual size_t handleBytes() const noexcept = 0;

  // handle: kHandleSize bytes.
  virtual Status listen(Context* ctx, int dev, std::byte* handle,
                        std::unique_ptr<Listener>* listener) = 0;
  // *comm stays empty while the connection is not made yet (poll again with
  // the same handle). wantDeviceHandle: as Listener::accept.
  virtual Status connect(Context* ctx, int dev, std::byte* handle,
                         DeviceHandleRequest wantDeviceHandle, std::unique_ptr<SendComm>* comm) = 0;

  // The optional calls it offers (see Capabilities).
  virtual Capabilities capabilities() const noexcept { return {}; }
  // NIC fusion: a new device made of props' physical devices; *dev its index.
  virtual Status makeVDevice(const VirtualDevice& props, int* dev) {
    (void)props;
    *dev = -1;
    return invalidUsage("makeVDevice: this transport cannot fuse devices");
  }
  // The collective network of the same library (NCCL looks ncclCollNetPlugin_vN
  // up in the net plugin's library, src/plugin/net.cc ncclNetPluginLoad);
  // nullptr: none. Owned by the transport, which outlives it.
  virtual CollNet* collNet() noexcept { return nullptr; }
  // Traffic hints for a communicator's connections (v11+).
  virtual Status setNetAttr(Context* ctx, NetAttributes* attr) {
    (void)ctx, (void)attr;
    return invalidUsage("setNetAttr: this transport takes no attributes");
  }
};

}  // namespace resilient::transport
