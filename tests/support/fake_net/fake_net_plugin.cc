// A fake NCCL net plugin for tests: an in-process loopback net, written
// against our own include/nccl declarations. The one source is compiled once
// per ABI version with -DFAKE_NET_VERSION=N (6..11) into
// libnccl-net-fake-v<N>.so, which exports only ncclNetPlugin_vN (named
// "FakeV<N>") plus the control functions of fake_net.h. v12 reports railId
// 10 + dev and planeId dev % 2. With N = 0 it
// exports no plugin symbol at all (a library that is not a net plugin).
//
// listen() writes a token into the handle (with the knob fillHandle, all 128
// bytes, the rest a pattern connect() checks); connect() finds the listener by
// that token in a registry of this library (after returning "poll again"
// connectPolls times, counted in the handle as real plugins keep their
// connect state there); accept() takes the next connection. A send and a
// receive move their bytes with memcpy once both are posted; a receive of
// n <= 8 buffers takes one send per tag. Everything runs under one mutex.
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/net_v11.h"  // the superset properties every version copies from
#include "nccl/result.h"
#include "tests/support/fake_net/fake_net.h"

#if FAKE_NET_VERSION == 6
#include "nccl/net_v6.h"
#elif FAKE_NET_VERSION == 7
#include "nccl/net_v7.h"
#elif FAKE_NET_VERSION == 8
#include "nccl/net_v8.h"
#elif FAKE_NET_VERSION == 9
#include "nccl/net_v9.h"
#elif FAKE_NET_VERSION == 10
#include "nccl/net_v10.h"
#elif FAKE_NET_VERSION == 12
#include "nccl/net_v12.h"
#elif FAKE_NET_VERSION != 0 && FAKE_NET_VERSION != 11
#error "FAKE_NET_VERSION must be 0 or 6..12"
#endif

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))
// An exported table: not const (the knobs fill in its optional members), so
// defined inside an extern "C" block (an initialised `extern` is a warning).
#define FAKE_TABLE __attribute__((visibility("default")))

namespace {

constexpr int kVersion = FAKE_NET_VERSION;
constexpr int kDevices = 2;     // physical devices unless the knob "ports" says otherwise
constexpr int kMaxPorts = 8;    // physical devices at most
constexpr int kMaxVirtual = 8;  // virtual devices makeVDevice appends at most
constexpr int kMaxFused = 8;    // physical devices per virtual one (v12's vProps)
constexpr int kMaxRecvs = 8;
constexpr uint64_t kHandleMagic = 0x54454e454b4146ull;   // "FAKENET"
constexpr uint64_t kContextMagic = 0x585443454b4146ull;  // "FAKECTX"

// What listen() writes into the 128-byte handle; the rest stays untouched.
struct Handle {
  uint64_t magic;
  uint64_t token;
  uint32_t connectPolls;  // "poll again" answers given so far for this handle
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "the handle must fit");

struct Context {
  uint64_t magic = kContextMagic;
  uint64_t commId = 0;
};

struct Comm;

struct FakeRequest {
  Comm* comm = nullptr;
  bool isSend = true;
  bool done = false;
  ncclResult_t error = ncclSuccess;
  // send
  const void* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // receive
  int n = 0;
  std::array<void*, kMaxRecvs> buffers{};
  std::array<size_t, kMaxRecvs> capacity{};
  std::array<int, kMaxRecvs> tags{};
  std::array<size_t, kMaxRecvs> received{};
  std::array<bool, kMaxRecvs> filled{};
};

// One connection: the posted sends and receives not matched yet.
struct Pair {
  std::deque<FakeRequest*> sends;
  std::deque<FakeRequest*> recvs;
};

enum class CommKind { kListen, kSend, kRecv };

struct Comm {
  CommKind kind = CommKind::kListen;
  int dev = 0;
  uint64_t token = 0;                         // listen
  std::deque<std::shared_ptr<Pair>> pending;  // listen: connected, not accepted
  std::shared_ptr<Pair> pair;                 // send/recv
  std::set<FakeRequest*> requests;            // outstanding
  std::deque<void*> consumable;  // recv: completed receives not yet passed to irecvConsumed
};

struct MemoryRegion {
  void* data = nullptr;
  size_t size = 0;
};

// A device makeVDevice appended: the physical devices it fuses.
struct VirtualDevice {
  int ndevs = 0;
  std::array<int, kMaxFused> devs{};
};

struct State {
  std::mutex mutex;
  FakeNetStats stats{};
  std::map<std::string, int> failNext;
  std::map<uint64_t, Comm*> listeners;
  uint64_t nextToken = 1;
  long connectPolls = 1;
  long deviceHandle = 0;
  long deviceType = 0;
  long maxRequests = kVersion == 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS;
  bool fillHandle = false;  // listen fills the whole handle (no room for anyone's trailer)
  bool hostMemory = true;   // ptrSupport has NCCL_PTR_HOST (else CUDA only)
  bool reportSizes = true;  // test() writes sizes
  bool garbageSendSize = false;  // test() of a send writes a wrong size
  bool wrongRecvSize = false;    // test() of a receive reports one byte more than arrived
  bool inProgress = false;  // successful calls return ncclInProgress
  long busyEvery = 0;       // every busyEvery-th isend/irecv: "cannot post now"
  long busyCount = 0;
  bool dmabuf = false;                  // the table has regMrDmaBuf; ptrSupport has NCCL_PTR_DMABUF
  long ports = kDevices;                // physical devices
  bool fusion = false;                  // the table has makeVDevice (v9+)
  bool getDeviceMr = false;             // the table has getDeviceMr (v7+)
  bool irecvConsumed = false;           // the table has irecvConsumed (v7+)
  bool netAttr = false;                 // the table has setNetAttr (v11+)
  bool stallRecv = false;               // receives never complete
  std::vector<VirtualDevice> virtuals;  // appended after the physical devices
  std::set<void*> regions;              // live mhandles (getDeviceMr checks them)
  ncclDebugLogger_t logger = nullptr;
  ncclProfilerCallback_t profiler = nullptr;
  bool initialised = false;
};

// What connect/accept hand out when told to ask for device offload.
ncclNetDeviceHandle_v7_t gOffload{NCCL_NET_DEVICE_UNPACK, NCCL_NET_DEVICE_UNPACK_VERSION, nullptr,
                                  0, 0};

State& state() {
  static State s;
  return s;
}

// The pattern of a filled handle's byte `i` (never 0).
[[maybe_unused]] unsigned char fillByte(size_t i) {
  return static_cast<unsigned char>(0x80 | (i * 37));
}

[[maybe_unused]] void resetLocked(State& s) {
  s.stats = FakeNetStats{};
  s.stats.version = kVersion;
  s.stats.lastTrafficClass = -2;
  s.failNext.clear();
  s.listeners.clear();
  s.connectPolls = 1;
  s.deviceHandle = 0;
  s.deviceType = 0;
  s.maxRequests = kVersion == 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS;
  s.fillHandle = false;
  s.hostMemory = true;
  s.reportSizes = true;
  s.garbageSendSize = false;
  s.wrongRecvSize = false;
  s.inProgress = false;
  s.busyEvery = 0;
  s.busyCount = 0;
  s.dmabuf = false;
  s.ports = kDevices;
  s.fusion = false;
  s.getDeviceMr = false;
  s.irecvConsumed = false;
  s.netAttr = false;
  s.stallRecv = false;
  s.virtuals.clear();
  s.regions.clear();
  s.initialised = false;
}

// Physical then virtual devices: what devices() counts.
[[maybe_unused]] int deviceCount(const State& s) {
  return static_cast<int>(s.ports) + static_cast<int>(s.virtuals.size());
}

#if FAKE_NET_VERSION != 0
// Sets the table's optional members from the knobs (defined with the table).
void applyTableLocked(const State& s);
#endif

// What a successful call returns: ncclSuccess, or with the knob inProgress
// ncclInProgress, which NCCL's checks also take for success.
[[maybe_unused]] ncclResult_t success(const State& s) {
  return s.inProgress ? ncclInProgress : ncclSuccess;
}

// Set on the threads that ran connection setup (listen, connect, accept,
// regMr): NCCL's service thread never runs the data path. Static TLS
// (initial-exec), not the dynamic TLS a dlopened module gets by default: a
// dynamic TLS block of a module that is dlclosed and loaded again trips
// LeakSanitizer's scan at exit (a tracer crash in the ASan plugin-loopback
// run). A thread id kept in the state would not do: ids are reused.
__attribute__((tls_model("initial-exec"))) thread_local bool tlsSetupThread = false;

[[maybe_unused]] void noteSetupCall() {
  tlsSetupThread = true;
}

[[maybe_unused]] void noteDataCall(State& s) {
  if (tlsSetupThread) {
    ++s.stats.dataCallsOnSetupThread;
  }
}

// "Cannot post now" every busyEvery-th post, when the knob is set.
[[maybe_unused]] bool busyNow(State& s) {
  return s.busyEvery > 0 && ++s.busyCount % s.busyEvery == 0;
}

// The result injected for `call`, consumed; ncclSuccess when none.
[[maybe_unused]] ncclResult_t injected(State& s, const char* call) {
  auto it = s.failNext.find(call);
  if (it == s.failNext.end()) {
    return ncclSuccess;
  }
  const auto result = static_cast<ncclResult_t>(it->second);
  s.failNext.erase(it);
  return result;
}

#define FAKE_ENTER(call)                                        \
  State& s = state();                                           \
  std::lock_guard<std::mutex> lock(s.mutex);                    \
  if (ncclResult_t r_ = injected(s, call); r_ != ncclSuccess) { \
    return r_;                                                  \
  }

[[maybe_unused]] void logLocked(State& s, ncclDebugLogLevel level, const char* func, int line,
                                const char* text) {
  if (s.logger != nullptr) {
    s.logger(level, NCCL_NET | NCCL_INIT, func, line, "FakeV%d: %s", kVersion, text);
    ++s.stats.logCalls;
  }
}

[[maybe_unused]] bool validContext(void* ctx) {
  return ctx != nullptr && static_cast<Context*>(ctx)->magic == kContextMagic;
}

// Moves bytes between the posted sends and receives of one connection.
[[maybe_unused]] void progress(Pair& pair) {
  while (!pair.recvs.empty()) {
    FakeRequest* recv = pair.recvs.front();
    for (auto it = pair.sends.begin(); it != pair.sends.end();) {
      FakeRequest* send = *it;
      int slot = -1;
      for (int i = 0; i < recv->n; ++i) {
        if (!recv->filled[i] && recv->tags[i] == send->tag) {
          slot = i;
          break;
        }
      }
      if (slot < 0) {
        ++it;
        continue;
      }
      if (send->size > recv->capacity[slot]) {
        send->error = ncclInternalError;  // the receive buffer is too small
        recv->error = ncclInternalError;
      } else if (send->size > 0) {
        std::memcpy(recv->buffers[slot], send->data, send->size);
      }
      recv->received[slot] = send->size;
      recv->filled[slot] = true;
      send->done = true;
      it = pair.sends.erase(it);
    }
    if (!std::all_of(recv->filled.begin(), recv->filled.begin() + recv->n,
                     [](bool f) { return f; })) {
      return;
    }
    recv->done = true;
    pair.recvs.pop_front();
  }
}

[[maybe_unused]] void dropRequest(State& s, FakeRequest* r) {
  r->comm->requests.erase(r);
  --s.stats.liveRequests;
  delete r;
}

// ---- the plugin, version-neutral -----------------------------------------

[[maybe_unused]] ncclResult_t coreInit(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  FAKE_ENTER("init");
  s.logger = logger;
  s.profiler = profiler;
  s.initialised = true;
  ++s.stats.initCalls;
  logLocked(s, NCCL_LOG_INFO, __func__, __LINE__, "init");
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreInitContext(void** ctx, uint64_t commId, int trafficClass,
                                              ncclDebugLogger_t logger,
                                              ncclProfilerCallback_t profiler) {
  {
    FAKE_ENTER("init");
    auto* context = new Context;
    context->commId = commId;
    *ctx = context;
    s.logger = logger;
    s.profiler = profiler;
    s.initialised = true;
    ++s.stats.initCalls;
    ++s.stats.liveContexts;
    s.stats.lastInitCtx = context;
    s.stats.lastCommId = commId;
    s.stats.lastTrafficClass = trafficClass;
    logLocked(s, NCCL_LOG_INFO, __func__, __LINE__, "init (context)");
  }
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreFinalize(void* ctx) {
  FAKE_ENTER("finalize");
  ++s.stats.finalizeCalls;
  if (ctx == nullptr) {
    return ncclSuccess;  // after a failed init
  }
  if (!validContext(ctx)) {
    return ncclInternalError;
  }
  static_cast<Context*>(ctx)->magic = 0;
  delete static_cast<Context*>(ctx);
  --s.stats.liveContexts;
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreDevices(int* ndev) {
  FAKE_ENTER("devices");
  ++s.stats.devicesCalls;
  if (!s.initialised) {
    return ncclInternalError;  // NCCL always calls init first
  }
  *ndev = deviceCount(s);
  return ncclSuccess;
}

// A physical device's name ("fake<dev>") or a virtual one's ("fake-vnic<k>",
// different from every physical name: NCCL finds the fused devices by name).
[[maybe_unused]] char* deviceName(int dev, int ports) {
  static const auto kNames = [] {
    std::array<std::string, kMaxPorts + kMaxVirtual> names;
    for (int i = 0; i < kMaxPorts; ++i) {
      names[static_cast<size_t>(i)] = "fake" + std::to_string(i);
    }
    for (int k = 0; k < kMaxVirtual; ++k) {
      names[static_cast<size_t>(kMaxPorts + k)] = "fake-vnic" + std::to_string(k);
    }
    return names;
  }();
  const int slot = dev < ports ? dev : kMaxPorts + (dev - ports);
  return const_cast<char*>(kNames[static_cast<size_t>(slot)].c_str());
}

// Fills the newest properties layout; the versions copy what they have.
// fused: the devices in vProps (v11's vProps holds only 4, v12's 8).
[[maybe_unused]] ncclResult_t coreProperties(int dev, ncclNetProperties_v11_t* p,
                                             VirtualDevice* fused) {
  FAKE_ENTER("getProperties");
  ++s.stats.getPropertiesCalls;
  if (dev < 0 || dev >= deviceCount(s)) {
    return ncclInternalError;
  }
  *p = ncclNetProperties_v11_t{};
  p->name = deviceName(dev, static_cast<int>(s.ports));
  p->pciPath = nullptr;
  p->guid = 0xfa4e0000ull + static_cast<uint64_t>(dev);
  p->ptrSupport = (s.hostMemory ? NCCL_PTR_HOST : NCCL_PTR_CUDA) | (s.dmabuf ? NCCL_PTR_DMABUF : 0);
  p->regIsGlobal = 1;
  p->forceFlush = 0;
  p->speed = 100000;
  p->port = dev + 1;
  p->latency = 1.5f;
  p->maxComms = 1024;
  p->maxRecvs = kMaxRecvs;
  p->netDeviceType = static_cast<ncclNetDeviceType>(s.deviceType);
  p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  *fused = VirtualDevice{1, {dev}};
  if (dev >= s.ports) {  // virtual: the fused devices' speed, the first one's port
    *fused = s.virtuals[static_cast<size_t>(dev - s.ports)];
    p->speed = 100000 * fused->ndevs;
    p->port = fused->devs[0] + 1;
  }
  p->vProps.ndevs = std::min(fused->ndevs, NCCL_NET_MAX_DEVS_PER_NIC);
  for (int i = 0; i < p->vProps.ndevs; ++i) {
    p->vProps.devs[i] = fused->devs[static_cast<size_t>(i)];
  }
  p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = 3ull << 30;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

// Appends a virtual device fusing `ndevs` distinct physical devices;
// capacity: the version's vProps.devs size.
[[maybe_unused]] ncclResult_t coreMakeVDevice(int* d, int ndevs, const int* devs, int capacity) {
  FAKE_ENTER("makeVDevice");
  ++s.stats.makeVDeviceCalls;
  s.stats.lastVDevice = FakeNetVDevice{};
  s.stats.lastVDevice.ndevs = ndevs;
  for (int i = 0; i < ndevs && i < kMaxFused; ++i) {
    s.stats.lastVDevice.devs[i] = devs[i];
  }
  if (d == nullptr || ndevs < 1 || ndevs > capacity || ndevs > kMaxFused ||
      static_cast<int>(s.virtuals.size()) >= kMaxVirtual) {
    return ncclInvalidArgument;
  }
  VirtualDevice v;
  v.ndevs = ndevs;
  for (int i = 0; i < ndevs; ++i) {
    const bool repeated = std::find(devs, devs + i, devs[i]) != devs + i;
    if (devs[i] < 0 || devs[i] >= s.ports || repeated) {
      return ncclInvalidArgument;  // only distinct physical devices fuse
    }
    v.devs[static_cast<size_t>(i)] = devs[i];
  }
  s.virtuals.push_back(v);
  *d = deviceCount(s) - 1;
  return ncclSuccess;
}

enum class Side { kSend, kRecv };

// The device-handle out-pointer of a connect or accept that made a comm
// (v7+), recorded. NCCL passes a pointer to NULL where it takes no handle,
// and for UNPACK receives a pointer to a handle it allocated, which the
// plugin fills in (src/transport/net.cc, ncclNetGetDeviceHandle). With the
// knob deviceHandle a pointer to NULL gets ours, an allocated one is filled.
[[maybe_unused]] void handOutDevice(State& s, ncclNetDeviceHandle_v7_t** devComm, Side side) {
  int& nullCount = side == Side::kSend ? s.stats.connectDevCommNull : s.stats.acceptDevCommNull;
  void*& in = side == Side::kSend ? s.stats.lastConnectDevCommIn : s.stats.lastAcceptDevCommIn;
  void*& out = side == Side::kSend ? s.stats.lastConnectDevCommOut : s.stats.lastAcceptDevCommOut;
  if (devComm == nullptr) {
    ++nullCount;
    return;
  }
  in = *devComm;
  if (s.deviceHandle != 0 && *devComm == nullptr) {
    *devComm = &gOffload;
  } else if (s.deviceHandle != 0) {
    (*devComm)->handle = &gOffload;  // any device-side pointer: never dereferenced
    (*devComm)->size = sizeof gOffload;
    (*devComm)->needsProxyProgress = 1;
  }
  out = *devComm;
}

[[maybe_unused]] ncclResult_t coreListen(void* ctx, int dev, void* handle, void** listenComm) {
  FAKE_ENTER("listen");
  ++s.stats.listenCalls;
  noteSetupCall();
  if (kVersion >= 11 && !validContext(ctx)) {
    return ncclInternalError;
  }
  if (dev < 0 || dev >= deviceCount(s)) {
    return ncclInternalError;
  }
  auto* comm = new Comm;
  comm->kind = CommKind::kListen;
  comm->dev = dev;
  comm->token = s.nextToken++;
  s.listeners[comm->token] = comm;
  Handle h{kHandleMagic, comm->token, 0};
  std::memcpy(handle, &h, sizeof h);
  if (s.fillHandle) {
    auto* bytes = static_cast<unsigned char*>(handle);
    for (size_t i = sizeof h; i < NCCL_NET_HANDLE_MAXSIZE; ++i) {
      bytes[i] = fillByte(i);
    }
  }
  *listenComm = comm;
  ++s.stats.liveComms;
  return success(s);
}

[[maybe_unused]] ncclResult_t coreConnect(void* ctx, int dev, const int* trafficClass, void* handle,
                                          void** sendComm, ncclNetDeviceHandle_v7_t** devComm) {
  FAKE_ENTER("connect");
  ++s.stats.connectCalls;
  noteSetupCall();
  if (kVersion >= 11 && !validContext(ctx)) {
    return ncclInternalError;
  }
  if (trafficClass != nullptr) {
    s.stats.lastTrafficClass = *trafficClass;
  }
  if (dev < 0 || dev >= deviceCount(s)) {
    return ncclInternalError;
  }
  Handle h{};
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != kHandleMagic) {
    return ncclInternalError;
  }
  if (s.fillHandle) {
    const auto* bytes = static_cast<const unsigned char*>(handle);
    for (size_t i = sizeof h; i < NCCL_NET_HANDLE_MAXSIZE; ++i) {
      if (bytes[i] != fillByte(i)) {
        return ncclInternalError;  // someone wrote into our handle
      }
    }
  }
  if (h.connectPolls < s.connectPolls) {
    ++h.connectPolls;  // state kept in the handle, as NCCL's plugins do
    std::memcpy(handle, &h, sizeof h);
    *sendComm = nullptr;
    return success(s);
  }
  auto it = s.listeners.find(h.token);
  if (it == s.listeners.end()) {
    return ncclSystemError;  // nobody listens: "connection refused"
  }
  auto pair = std::make_shared<Pair>();
  it->second->pending.push_back(pair);
  auto* comm = new Comm;
  comm->kind = CommKind::kSend;
  comm->dev = dev;
  comm->pair = pair;
  *sendComm = comm;
  ++s.stats.liveComms;
  handOutDevice(s, devComm, Side::kSend);
  return success(s);
}

[[maybe_unused]] ncclResult_t coreAccept(void* listenComm, void** recvComm,
                                         ncclNetDeviceHandle_v7_t** devComm) {
  FAKE_ENTER("accept");
  ++s.stats.acceptCalls;
  noteSetupCall();
  auto* listener = static_cast<Comm*>(listenComm);
  if (listener == nullptr || listener->kind != CommKind::kListen) {
    return ncclInternalError;
  }
  if (listener->pending.empty()) {
    *recvComm = nullptr;  // poll again
    return success(s);
  }
  auto* comm = new Comm;
  comm->kind = CommKind::kRecv;
  comm->dev = listener->dev;
  comm->pair = listener->pending.front();
  listener->pending.pop_front();
  *recvComm = comm;
  ++s.stats.liveComms;
  handOutDevice(s, devComm, Side::kRecv);
  return success(s);
}

[[maybe_unused]] ncclResult_t coreRegMr(void* comm, void* data, size_t size, int type,
                                        void** mhandle) {
  FAKE_ENTER("regMr");
  ++s.stats.regMrCalls;
  noteSetupCall();
  if (comm == nullptr || type != NCCL_PTR_HOST) {
    return ncclInternalError;
  }
  *mhandle = new MemoryRegion{data, size};
  s.regions.insert(*mhandle);
  ++s.stats.liveMhandles;
  return success(s);
}

// DMA-BUF registration: the fd must be open during the call (the caller
// closes it right after, so it is only looked at, never kept); the region is
// then used like regMr's (the data pointer is the start of the range, offset
// 0 in NCCL's use).
[[maybe_unused]] ncclResult_t coreRegMrDmaBuf(void* comm, void* data, size_t size, int type,
                                              uint64_t offset, int fd, void** mhandle) {
  FAKE_ENTER("regMrDmaBuf");
  ++s.stats.regMrDmaBufCalls;
  noteSetupCall();
  s.stats.lastDmaBufFd = fd;
  s.stats.lastDmaBufOffset = offset;
  s.stats.lastDmaBufSize = size;
  s.stats.lastDmaBufType = type;
  s.stats.lastDmaBufInode = 0;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return ncclInvalidArgument;
  }
  s.stats.lastDmaBufInode = static_cast<uint64_t>(st.st_ino);
  if (comm == nullptr) {
    return ncclInternalError;
  }
  *mhandle = new MemoryRegion{data, size};
  s.regions.insert(*mhandle);
  ++s.stats.liveMhandles;
  return success(s);
}

// A region's device-side handle: a pointer derived from the mhandle (never
// dereferenced), so that a test can tell it from the mhandle and from NULL.
[[maybe_unused]] ncclResult_t coreGetDeviceMr(void* comm, void* mhandle, void** dptrMhandle) {
  FAKE_ENTER("getDeviceMr");
  ++s.stats.getDeviceMrCalls;
  if (comm == nullptr || s.regions.count(mhandle) == 0) {
    return ncclInternalError;
  }
  *dptrMhandle = static_cast<char*>(mhandle) + 1;
  s.stats.lastDeviceMr = *dptrMhandle;
  return success(s);
}

// setNetAttr (v11+): recorded, with the context it was given (NCCL passes
// init's).
[[maybe_unused]] ncclResult_t coreSetNetAttr(void* ctx, const ncclNetAttr_v11_t* attr) {
  FAKE_ENTER("setNetAttr");
  ++s.stats.setNetAttrCalls;
  s.stats.lastNetAttrCtx = ctx;
  if (attr == nullptr || !validContext(ctx)) {
    return ncclInternalError;
  }
  const ncclNetCommAttr_v11_t* sides[2] = {&attr->sendCommAttr, &attr->recvCommAttr};
  int32_t* out[2] = {s.stats.lastNetAttr.sendCommAttr, s.stats.lastNetAttr.recvCommAttr};
  for (int i = 0; i < 2; ++i) {
    out[i][0] = sides[i]->maxConcurrentPeers;
    out[i][1] = sides[i]->minConcurrentPeers;
    out[i][2] = sides[i]->maxFlowsPerPeer;
    out[i][3] = sides[i]->minFlowsPerPeer;
  }
  s.stats.lastNetAttr.op = attr->op;
  s.stats.lastNetAttr.algo = attr->algo;
  s.stats.lastNetAttr.proto = attr->proto;
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreDeregMr(void* /*comm*/, void* mhandle) {
  FAKE_ENTER("deregMr");
  ++s.stats.deregMrCalls;
  if (mhandle == nullptr) {
    return ncclInternalError;
  }
  s.regions.erase(mhandle);
  delete static_cast<MemoryRegion*>(mhandle);
  --s.stats.liveMhandles;
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreIsend(void* sendComm, void* data, size_t size, int tag,
                                        void* phandle, void** request) {
  FAKE_ENTER("isend");
  ++s.stats.isendCalls;
  noteDataCall(s);
  s.stats.lastIsendSize = size;
  s.stats.lastPhandle = phandle;
  auto* comm = static_cast<Comm*>(sendComm);
  if (comm == nullptr || comm->kind != CommKind::kSend) {
    return ncclInternalError;
  }
  if (static_cast<long>(comm->requests.size()) >= s.maxRequests || busyNow(s)) {
    *request = nullptr;  // cannot post now
    return success(s);
  }
  if (phandle != nullptr && s.profiler != nullptr) {
    void* event = nullptr;
    s.profiler(&event, ncclProfilerNetCallbackStart, phandle, 0x40001, nullptr);
    ++s.stats.profilerCalls;
    if (event != nullptr) {
      s.profiler(&event, ncclProfilerNetCallbackStop, nullptr, 0, nullptr);
      ++s.stats.profilerCalls;
    }
  }
  auto* r = new FakeRequest;
  r->comm = comm;
  r->isSend = true;
  r->data = data;
  r->size = size;
  r->tag = tag;
  comm->requests.insert(r);
  comm->pair->sends.push_back(r);
  ++s.stats.liveRequests;
  progress(*comm->pair);
  *request = r;
  return success(s);
}

[[maybe_unused]] ncclResult_t coreIrecv(void* recvComm, int n, void** data, const size_t* sizes,
                                        const int* tags, void** phandles, void** request) {
  FAKE_ENTER("irecv");
  ++s.stats.irecvCalls;
  noteDataCall(s);
  s.stats.lastRecvRequestIn = *request;
  auto* comm = static_cast<Comm*>(recvComm);
  if (comm == nullptr || comm->kind != CommKind::kRecv || n < 1 || n > kMaxRecvs) {
    *request = nullptr;
    return ncclInternalError;
  }
  s.stats.lastRecvN = n;
  s.stats.lastRecvPhandle = phandles != nullptr ? phandles[0] : nullptr;
  for (int i = 0; i < n; ++i) {
    s.stats.lastRecvTags[i] = tags[i];
    s.stats.lastRecvSizes[i] = sizes[i];
  }
  if (static_cast<long>(comm->requests.size()) >= s.maxRequests || busyNow(s)) {
    *request = nullptr;  // cannot post now (overwrites a 0x1 hint too)
    return success(s);
  }
  auto* r = new FakeRequest;
  r->comm = comm;
  r->isSend = false;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->buffers[i] = data[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  comm->requests.insert(r);
  comm->pair->recvs.push_back(r);
  ++s.stats.liveRequests;
  progress(*comm->pair);
  *request = r;
  return success(s);
}

[[maybe_unused]] ncclResult_t coreIflush(void* recvComm, int /*n*/, void** /*data*/, int* /*sizes*/,
                                         void** /*mhandles*/, void** request) {
  FAKE_ENTER("iflush");
  ++s.stats.iflushCalls;
  if (recvComm == nullptr) {
    return ncclInternalError;
  }
  *request = nullptr;  // host memory: nothing to wait for
  return success(s);
}

[[maybe_unused]] ncclResult_t coreTest(void* request, int* done, int* sizes) {
  FAKE_ENTER("test");
  ++s.stats.testCalls;
  noteDataCall(s);
  auto* r = static_cast<FakeRequest*>(request);
  if (r == nullptr) {
    return ncclInternalError;
  }
  progress(*r->comm->pair);
  if (r->error != ncclSuccess) {
    return r->error;
  }
  *done = r->done && !(s.stallRecv && !r->isSend) ? 1 : 0;
  if (*done == 0) {
    return success(s);
  }
  if (sizes != nullptr && s.reportSizes) {
    if (r->isSend) {
      sizes[0] = s.garbageSendSize ? -12345 : static_cast<int>(r->size);
    } else {
      for (int i = 0; i < r->n; ++i) {
        sizes[i] = static_cast<int>(r->received[i]) + (s.wrongRecvSize ? 1 : 0);
      }
    }
  }
  if (!r->isSend) {
    ++s.stats.recvsCompleted;
    r->comm->consumable.push_back(r);
  }
  dropRequest(s, r);
  return success(s);
}

// NCCL calls it, in receive order, with the pointer of a completed receive
// once the GPU consumed its data.
[[maybe_unused]] ncclResult_t coreIrecvConsumed(void* recvComm, int n, void* request) {
  FAKE_ENTER("irecvConsumed");
  ++s.stats.irecvConsumedCalls;
  auto* comm = static_cast<Comm*>(recvComm);
  if (comm == nullptr || comm->kind != CommKind::kRecv || n < 1 || n > kMaxRecvs ||
      comm->consumable.empty() || comm->consumable.front() != request) {
    ++s.stats.irecvConsumedWrong;
    return ncclInternalError;
  }
  comm->consumable.pop_front();
  return success(s);
}

// Frees a send/recv comm and the requests it still has.
[[maybe_unused]] void closeComm(State& s, Comm* comm) {
  for (FakeRequest* r : std::set<FakeRequest*>(comm->requests)) {
    auto& queue = r->isSend ? comm->pair->sends : comm->pair->recvs;
    queue.erase(std::remove(queue.begin(), queue.end(), r), queue.end());
    dropRequest(s, r);
  }
  delete comm;
  --s.stats.liveComms;
}

[[maybe_unused]] ncclResult_t coreCloseSend(void* sendComm) {
  FAKE_ENTER("closeSend");
  ++s.stats.closeSendCalls;
  auto* comm = static_cast<Comm*>(sendComm);
  if (comm == nullptr || comm->kind != CommKind::kSend) {
    return ncclInternalError;
  }
  closeComm(s, comm);
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreCloseRecv(void* recvComm) {
  FAKE_ENTER("closeRecv");
  ++s.stats.closeRecvCalls;
  auto* comm = static_cast<Comm*>(recvComm);
  if (comm == nullptr || comm->kind != CommKind::kRecv) {
    return ncclInternalError;
  }
  closeComm(s, comm);
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t coreCloseListen(void* listenComm) {
  FAKE_ENTER("closeListen");
  ++s.stats.closeListenCalls;
  auto* comm = static_cast<Comm*>(listenComm);
  if (comm == nullptr || comm->kind != CommKind::kListen) {
    return ncclInternalError;
  }
  s.listeners.erase(comm->token);
  delete comm;
  --s.stats.liveComms;
  return ncclSuccess;
}

// ---- the versions ---------------------------------------------------------

// Properties of the older layouts: the fields they have, in their order.
template <class P>
[[maybe_unused]] ncclResult_t propertiesAs(int dev, P* out) {
  ncclNetProperties_v11_t p{};
  VirtualDevice fused;
  if (ncclResult_t r = coreProperties(dev, &p, &fused); r != ncclSuccess) {
    return r;
  }
  *out = P{};
  out->name = p.name;
  out->pciPath = p.pciPath;
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  if constexpr (kVersion >= 7) {
    out->netDeviceType = p.netDeviceType;
    out->netDeviceVersion = p.netDeviceVersion;
  }
  if constexpr (kVersion >= 8) {
    out->regIsGlobal = p.regIsGlobal;
  }
  if constexpr (kVersion >= 9) {
    out->forceFlush = p.forceFlush;
    constexpr int kCapacity = static_cast<int>(sizeof out->vProps.devs / sizeof(int));
    out->vProps.ndevs = std::min(fused.ndevs, kCapacity);
    for (int i = 0; i < out->vProps.ndevs; ++i) {
      out->vProps.devs[i] = fused.devs[static_cast<size_t>(i)];
    }
    out->maxP2pBytes = p.maxP2pBytes;
    out->maxCollBytes = p.maxCollBytes;
  }
  if constexpr (requires { out->maxMultiRequestSize; }) {  // v11+
    out->maxMultiRequestSize = p.maxMultiRequestSize;
  }
  if constexpr (requires { out->railId; }) {  // v12: the device's rail and plane
    out->railId = static_cast<int16_t>(10 + dev);
    out->planeId = static_cast<int16_t>(dev % 2);
  }
  return ncclSuccess;
}

// The per-version call shapes (each version uses some of them).
[[maybe_unused]] ncclResult_t legacyInit(ncclDebugLogger_t logger) {
  return coreInit(logger, nullptr);
}
[[maybe_unused]] ncclResult_t legacyListen(int dev, void* handle, void** listenComm) {
  return coreListen(nullptr, dev, handle, listenComm);
}
[[maybe_unused]] ncclResult_t acceptWithHandle(void* listenComm, void** recvComm,
                                               ncclNetDeviceHandle_v7_t** devComm) {
  return coreAccept(listenComm, recvComm, devComm);
}
[[maybe_unused]] ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  return coreRegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}
[[maybe_unused]] ncclResult_t isendInt(void* comm, void* data, int size, int tag, void* /*mh*/,
                                       void** request) {
  return coreIsend(comm, data, static_cast<size_t>(size), tag, nullptr, request);
}
[[maybe_unused]] ncclResult_t irecvInt(void* comm, int n, void** data, int* sizes, int* tags,
                                       void** /*mh*/, void** request) {
  std::array<size_t, kMaxRecvs> wide{};
  for (int i = 0; i < n && i < kMaxRecvs; ++i) {
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return coreIrecv(comm, n, data, wide.data(), tags, nullptr, request);
}
[[maybe_unused]] ncclResult_t isendSize(void* comm, void* data, size_t size, int tag, void* /*mh*/,
                                        void** request) {
  return coreIsend(comm, data, size, tag, nullptr, request);
}
[[maybe_unused]] ncclResult_t irecvSize(void* comm, int n, void** data, size_t* sizes, int* tags,
                                        void** /*mh*/, void** request) {
  return coreIrecv(comm, n, data, sizes, tags, nullptr, request);
}
[[maybe_unused]] ncclResult_t isendProfiled(void* comm, void* data, size_t size, int tag,
                                            void* /*mh*/, void* phandle, void** request) {
  return coreIsend(comm, data, size, tag, phandle, request);
}
[[maybe_unused]] ncclResult_t irecvProfiled(void* comm, int n, void** data, size_t* sizes,
                                            int* tags, void** /*mh*/, void** phandles,
                                            void** request) {
  return coreIrecv(comm, n, data, sizes, tags, phandles, request);
}

}  // namespace

#if FAKE_NET_VERSION == 6
namespace {
ncclResult_t connectV6(int dev, void* handle, void** sendComm) {
  return coreConnect(nullptr, dev, nullptr, handle, sendComm, nullptr);
}
ncclResult_t acceptV6(void* listenComm, void** recvComm) {
  return coreAccept(listenComm, recvComm, nullptr);
}
}  // namespace
#endif

#if FAKE_NET_VERSION >= 7 && FAKE_NET_VERSION <= 9
namespace {
ncclResult_t connectV7(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** devComm) {
  return coreConnect(nullptr, dev, nullptr, handle, sendComm, devComm);
}
}  // namespace
#endif

#if FAKE_NET_VERSION == 6
extern "C" {
FAKE_TABLE ncclNet_v6_t ncclNetPlugin_v6 = {
    .name = "FakeV6",
    .init = &legacyInit,
    .devices = &coreDevices,
    .getProperties = &propertiesAs<ncclNetProperties_v6_t>,
    .listen = &legacyListen,
    .connect = &connectV6,
    .accept = &acceptV6,
    .regMr = &regMrInt,
    .regMrDmaBuf = nullptr,
    .deregMr = &coreDeregMr,
    .isend = &isendInt,
    .irecv = &irecvInt,
    .iflush = &coreIflush,
    .test = &coreTest,
    .closeSend = &coreCloseSend,
    .closeRecv = &coreCloseRecv,
    .closeListen = &coreCloseListen,
};
}
#elif FAKE_NET_VERSION == 7
extern "C" {
FAKE_TABLE ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = "FakeV7",
    .init = &legacyInit,
    .devices = &coreDevices,
    .getProperties = &propertiesAs<ncclNetProperties_v7_t>,
    .listen = &legacyListen,
    .connect = &connectV7,
    .accept = &acceptWithHandle,
    .regMr = &regMrInt,
    .regMrDmaBuf = nullptr,
    .deregMr = &coreDeregMr,
    .isend = &isendInt,
    .irecv = &irecvInt,
    .iflush = &coreIflush,
    .test = &coreTest,
    .closeSend = &coreCloseSend,
    .closeRecv = &coreCloseRecv,
    .closeListen = &coreCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};
}
#elif FAKE_NET_VERSION == 8
extern "C" {
FAKE_TABLE ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "FakeV8",
    .init = &legacyInit,
    .devices = &coreDevices,
    .getProperties = &propertiesAs<ncclNetProperties_v8_t>,
    .listen = &legacyListen,
    .connect = &connectV7,
    .accept = &acceptWithHandle,
    .regMr = &coreRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = &coreDeregMr,
    .isend = &isendInt,
    .irecv = &irecvInt,
    .iflush = &coreIflush,
    .test = &coreTest,
    .closeSend = &coreCloseSend,
    .closeRecv = &coreCloseRecv,
    .closeListen = &coreCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};
}
#elif FAKE_NET_VERSION == 9
extern "C" {
FAKE_TABLE ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "FakeV9",
    .init = &legacyInit,
    .devices = &coreDevices,
    .getProperties = &propertiesAs<ncclNetProperties_v9_t>,
    .listen = &legacyListen,
    .connect = &connectV7,
    .accept = &acceptWithHandle,
    .regMr = &coreRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = &coreDeregMr,
    .isend = &isendSize,
    .irecv = &irecvSize,
    .iflush = &coreIflush,
    .test = &coreTest,
    .closeSend = &coreCloseSend,
    .closeRecv = &coreCloseRecv,
    .closeListen = &coreCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};
}
#elif FAKE_NET_VERSION == 10
namespace {
ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                        ncclNetDeviceHandle_v10_t** devComm) {
  const int* trafficClass = config != nullptr ? &config->trafficClass : nullptr;
  return coreConnect(nullptr, dev, trafficClass, handle, sendComm, devComm);
}
}  // namespace
extern "C" {
FAKE_TABLE ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "FakeV10",
    .init = &coreInit,
    .devices = &coreDevices,
    .getProperties = &propertiesAs<ncclNetProperties_v10_t>,
    .listen = &legacyListen,
    .connect = &connectV10,
    .accept = &acceptWithHandle,
    .regMr = &coreRegMr,
    .regMrDmaBuf = nullptr,
    .deregMr = &coreDeregMr,
    .isend = &isendProfiled,
    .irecv = &irecvProfiled,
    .iflush = &coreIflush,
    .test = &coreTest,
    .closeSend = &coreCloseSend,
    .closeRecv = &coreCloseRecv,
    .closeListen = &coreCloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
};
}
#endif

#if FAKE_NET_VERSION >= 11
namespace {
// The per-context versions (v11, v12) share their calls (their config and
// device-handle types are the same); only the properties differ.
ncclResult_t initContextVersion(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                                ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  const int trafficClass = config != nullptr ? config->trafficClass : -2;
  return coreInitContext(ctx, commId, trafficClass, logger, profiler);
}
ncclResult_t connectContextVersion(void* ctx, int dev, void* handle, void** sendComm,
                                   ncclNetDeviceHandle_v11_t** devComm) {
  return coreConnect(ctx, dev, nullptr, handle, sendComm, devComm);
}
template <class Net, class Props>
constexpr Net contextTable(const char* name) {
  return Net{
      .name = name,
      .init = &initContextVersion,
      .devices = &coreDevices,
      .getProperties = &propertiesAs<Props>,
      .listen = &coreListen,
      .connect = &connectContextVersion,
      .accept = &acceptWithHandle,
      .regMr = &coreRegMr,
      .regMrDmaBuf = nullptr,
      .deregMr = &coreDeregMr,
      .isend = &isendProfiled,
      .irecv = &irecvProfiled,
      .iflush = &coreIflush,
      .test = &coreTest,
      .closeSend = &coreCloseSend,
      .closeRecv = &coreCloseRecv,
      .closeListen = &coreCloseListen,
      .getDeviceMr = nullptr,
      .irecvConsumed = nullptr,
      .makeVDevice = nullptr,
      .finalize = &coreFinalize,
      .setNetAttr = nullptr,
  };
}
}  // namespace
#endif

#if FAKE_NET_VERSION == 11
namespace {
// The whole table. The lazy variant (FAKE_NET_LAZY_TABLE, as
// nccl-rdma-sharp-plugins does) exports only the name and init, and its init
// fills in the rest before doing what init does.
constexpr ncclNet_v11_t kTableV11 = contextTable<ncclNet_v11_t, ncclNetProperties_v11_t>("FakeV11");

#if FAKE_NET_LAZY_TABLE
ncclResult_t initV11Lazy(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                         ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);
constexpr ncclNet_v11_t lazyTable() {
  ncclNet_v11_t t{};
  t.name = "FakeV11Lazy";
  t.init = &initV11Lazy;
  return t;
}
}  // namespace
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = lazyTable();
}
namespace {
ncclResult_t initV11Lazy(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                         ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  const char* name = ncclNetPlugin_v11.name;
  ncclNetPlugin_v11 = kTableV11;
  ncclNetPlugin_v11.name = name;
  ncclNetPlugin_v11.init = &initV11Lazy;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    applyTableLocked(s);  // the knobs, set before init
  }
  return initContextVersion(ctx, commId, config, logger, profiler);
}
}  // namespace
#else
}  // namespace
// Not const: the knobs fill in the optional members.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = kTableV11;
}
#endif
#endif

#if FAKE_NET_VERSION == 12
extern "C" {
FAKE_TABLE ncclNet_v12_t ncclNetPlugin_v12 =
    contextTable<ncclNet_v12_t, ncclNetProperties_v12_t>("FakeV12");
}
#endif

#if FAKE_NET_VERSION != 0
namespace {
// makeVDevice of every version (VProps: its ncclNetVDeviceProps, 4 or 8 devices).
template <class VProps>
ncclResult_t makeVDeviceAs(int* d, VProps* props) {
  if (props == nullptr) {
    return ncclInvalidArgument;
  }
  constexpr int kCapacity = static_cast<int>(sizeof props->devs / sizeof props->devs[0]);
  return coreMakeVDevice(d, props->ndevs, props->devs, kCapacity);
}
ncclResult_t setNetAttrAs(void* ctx, ncclNetAttr_v11_t* attr) {
  return coreSetNetAttr(ctx, attr);
}

// Each optional member the version has: ours when its knob is on, else NULL.
template <class Net>
void applyTo(Net& t, const State& s) {
  t.regMrDmaBuf = s.dmabuf ? &coreRegMrDmaBuf : nullptr;
  if constexpr (requires { t.getDeviceMr; }) {  // v7+
    t.getDeviceMr = s.getDeviceMr ? &coreGetDeviceMr : nullptr;
    t.irecvConsumed = s.irecvConsumed ? &coreIrecvConsumed : nullptr;
  }
  if constexpr (requires { t.makeVDevice; }) {  // v9+
    t.makeVDevice = nullptr;
    if (s.fusion) {
      t.makeVDevice = &makeVDeviceAs;
    }
  }
  if constexpr (requires { t.setNetAttr; }) {  // v11+
    t.setNetAttr = s.netAttr ? &setNetAttrAs : nullptr;
  }
}

void applyTableLocked(const State& s) {
#if FAKE_NET_VERSION == 6
  applyTo(ncclNetPlugin_v6, s);
#elif FAKE_NET_VERSION == 7
  applyTo(ncclNetPlugin_v7, s);
#elif FAKE_NET_VERSION == 8
  applyTo(ncclNetPlugin_v8, s);
#elif FAKE_NET_VERSION == 9
  applyTo(ncclNetPlugin_v9, s);
#elif FAKE_NET_VERSION == 10
  applyTo(ncclNetPlugin_v10, s);
#elif FAKE_NET_VERSION == 11
#if FAKE_NET_LAZY_TABLE
  if (ncclNetPlugin_v11.devices == nullptr) {
    return;  // not filled yet: its init applies the knobs
  }
#endif
  applyTo(ncclNetPlugin_v11, s);
#elif FAKE_NET_VERSION == 12
  applyTo(ncclNetPlugin_v12, s);
#endif
}
}  // namespace
#endif

// ---- control ---------------------------------------------------------------

FAKE_EXPORT void fakeNetStats(FakeNetStats* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *out = s.stats;
  out->version = kVersion;
}

FAKE_EXPORT void fakeNetReset(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  resetLocked(s);
#if FAKE_NET_VERSION != 0
  applyTableLocked(s);
#endif
}

FAKE_EXPORT void fakeNetFailNext(const char* call, int result) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.failNext[call] = result;
}

FAKE_EXPORT int fakeNetLog(int level, const char* text) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.logger == nullptr) {
    return -1;
  }
  logLocked(s, static_cast<ncclDebugLogLevel>(level), __func__, __LINE__, text);
  return 0;
}

FAKE_EXPORT int fakeNetSet(const char* knob, long value) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const std::string name(knob);
  if (name == "connectPolls") {
    s.connectPolls = value;
  } else if (name == "deviceHandle") {
    s.deviceHandle = value;
  } else if (name == "deviceType") {
    s.deviceType = value;
  } else if (name == "maxRequests") {
    s.maxRequests = value;
  } else if (name == "fillHandle") {
    s.fillHandle = value != 0;
  } else if (name == "hostMemory") {
    s.hostMemory = value != 0;
  } else if (name == "reportSizes") {
    s.reportSizes = value != 0;
  } else if (name == "garbageSendSize") {
    s.garbageSendSize = value != 0;
  } else if (name == "wrongRecvSize") {
    s.wrongRecvSize = value != 0;
  } else if (name == "inProgress") {
    s.inProgress = value != 0;
  } else if (name == "busyEvery") {
    s.busyEvery = value;
  } else if (name == "stallRecv") {
    s.stallRecv = value != 0;
  } else if (name == "ports" && value >= 1 && value <= kMaxPorts) {
    s.ports = value;
  } else if (kVersion == 0) {
    return -1;  // no table: none of the members below
  } else if (name == "dmabuf") {
    s.dmabuf = value != 0;
  } else if (name == "irecvConsumed" && kVersion >= 7) {
    s.irecvConsumed = value != 0;
  } else if (name == "getDeviceMr" && kVersion >= 7) {
    s.getDeviceMr = value != 0;
  } else if (name == "fusion" && kVersion >= 9) {
    s.fusion = value != 0;
  } else if (name == "netAttr" && kVersion >= 11) {
    s.netAttr = value != 0;
  } else {
    return -1;
  }
#if FAKE_NET_VERSION != 0
  applyTableLocked(s);
#endif
  return 0;
}
