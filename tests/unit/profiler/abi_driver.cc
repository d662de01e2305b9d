#include "abi_driver.h"

#include <unistd.h>

#include <cstring>
#include <thread>
#include <type_traits>

#include "nccl/profiler_v1.h"
#include "nccl/profiler_v2.h"
#include "nccl/profiler_v3.h"
#include "nccl/profiler_v4.h"
#include "nccl/profiler_v5.h"
#include "nccl/profiler_v6.h"
#include "nccl/profiler_v7.h"

extern "C" {
extern const ncclProfiler_v7_t ncclProfiler_v7;
extern const ncclProfiler_v6_t ncclProfiler_v6;
extern const ncclProfiler_v5_t ncclProfiler_v5;
extern const ncclProfiler_v4_t ncclProfiler_v4;
extern const ncclProfiler_v3_t ncclProfiler_v3;
extern const ncclProfiler_v2_t ncclProfiler_v2;
extern const ncclProfiler_v1_t ncclProfiler_v1;
}

namespace resilient::test {
namespace {

uint64_t typeBit(EventType t) {
  switch (t) {
    case EventType::kGroupApi: return ncclProfileGroupApi;
    case EventType::kCollApi: return ncclProfileCollApi;
    case EventType::kP2pApi: return ncclProfileP2pApi;
    case EventType::kKernelLaunch: return ncclProfileKernelLaunch;
    case EventType::kGroup: return ncclProfileGroup;
    case EventType::kColl: return ncclProfileColl;
    case EventType::kP2p: return ncclProfileP2p;
    case EventType::kProxyOp: return ncclProfileProxyOp;
    case EventType::kProxyStep: return ncclProfileProxyStep;
    case EventType::kProxyCtrl: return ncclProfileProxyCtrl;
    case EventType::kKernelCh: return ncclProfileKernelCh;
    case EventType::kNetPlugin: return ncclProfileNetPlugin;
    case EventType::kKernelPhase: return ncclProfileKernelPhase;
  }
  return 0;
}

pid_t pidOf(const Event& e) {
  return e.pid != 0 ? e.pid : getpid();
}

// v1 numeric codes (ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_*).
uint8_t funcCode(const char* f) {
  static const char* const kNames[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
  for (uint8_t i = 0; i < 8; ++i) {
    if (std::strcmp(f, kNames[i]) == 0) {
      return i;
    }
  }
  return 255;
}
uint8_t datatypeCode(const char* d) {
  return std::strcmp(d, "ncclFloat32") == 0 ? 7 : std::strcmp(d, "ncclInt8") == 0 ? 0 : 255;
}

// Function, datatype, algorithm and protocol: NCCL's strings (v2+) or the
// v1 numeric codes.
template <class M>
void fillNames(const Event& e, M& m) {
  if constexpr (std::is_same_v<decltype(m.func), const char*>) {
    m.func = e.func;
    m.datatype = e.datatype;
    if constexpr (requires { m.algo; }) {
      m.algo = e.algo;
      m.proto = e.proto;
    }
  } else {
    m.func = funcCode(e.func);
    m.datatype = datatypeCode(e.datatype);
    if constexpr (requires { m.algo; }) {
      m.algo = 1;   // RING
      m.proto = 2;  // SIMPLE
    }
  }
}

// Coll and p2p members: v1-v3 name the communicator and give coll an upper
// bound of channels (nMaxChannels); v4+ give the real channel count; v1, v2
// give coll.trafficBytes.
template <class M>
void fillOp(const Event& e, M& m) {
  fillNames(e, m);
  m.count = e.count;
  if constexpr (requires { m.commHash; }) {
    m.name = "test-comm";
    m.commHash = e.commHash;
  }
  if constexpr (requires { m.nChannels; }) {
    m.nChannels = e.nChannels;
  } else if constexpr (requires { m.nMaxChannels; }) {
    m.nMaxChannels = 32;  // an upper bound, not the real count
  }
  if constexpr (requires { m.nWarps; }) {
    m.nWarps = 16;
  }
  if constexpr (requires { m.trafficBytes; }) {
    m.trafficBytes = e.count * 4;
  }
  if constexpr (requires { m.userTag; }) {
    m.userTag = e.userTag;
  }
}

// v5 API events.
template <class D>
void fillApi(const Event& e, D& d) {
  if constexpr (requires { d.collApi; }) {
    switch (e.type) {
      case EventType::kGroupApi: d.groupApi.groupDepth = e.groupDepth; break;
      case EventType::kCollApi:
        d.collApi.func = e.func;
        d.collApi.count = e.count;
        d.collApi.datatype = e.datatype;
        d.collApi.root = e.rootOrPeer;
        if constexpr (requires { d.collApi.userTag; }) {
          d.collApi.userTag = e.userTag;
        }
        break;
      case EventType::kP2pApi:
        d.p2pApi.func = e.func;
        d.p2pApi.count = e.count;
        d.p2pApi.datatype = e.datatype;
        if constexpr (requires { d.p2pApi.userTag; }) {
          d.p2pApi.userTag = e.userTag;
        }
        break;
      default: break;
    }
  }
}

// v7 kernel phases.
template <class D>
void fillPhase(const Event& e, D& d) {
  if constexpr (requires { d.kernelPhase; }) {
    d.kernelPhase.channelId = e.channel;
    d.kernelPhase.phaseId = e.phaseId;
    d.kernelPhase.phaseName = e.func;
    d.kernelPhase.pTimer = e.pTimer;
  }
}

// The descriptor of `e` in version D's layout; members a version lacks are
// left out (proxy-op, proxy-step, kernel-channel and net-plugin members sit
// at the same offsets wherever they exist, docs/reference/nccl-abi.md §2.4).
template <class D>
void fill(const Event& e, D& d) {
  switch (e.type) {
    case EventType::kColl:
      fillOp(e, d.coll);
      d.coll.seqNumber = e.seqNumber;
      d.coll.root = e.rootOrPeer;
      if constexpr (requires { d.coll.isSymColl; }) {
        d.coll.isSymColl = e.isSymColl;
        d.coll.kernelVariant = e.isSymColl ? "AllReduce_RSxLD_AGxST" : nullptr;
      }
      break;
    case EventType::kP2p:
      fillOp(e, d.p2p);
      d.p2p.peer = e.rootOrPeer;
      break;
    case EventType::kProxyOp:
      d.proxyOp.pid = pidOf(e);
      d.proxyOp.channelId = e.channel;
      d.proxyOp.peer = e.rootOrPeer;
      d.proxyOp.nSteps = e.nSteps;
      d.proxyOp.chunkSize = 131072;
      d.proxyOp.isSend = e.isSend;
      break;
    case EventType::kProxyStep: d.proxyStep.step = e.step; break;
    case EventType::kKernelCh:
      if constexpr (requires { d.kernelCh; }) {
        d.kernelCh.channelId = e.channel;
        if constexpr (requires { d.kernelCh.pTimer; }) {
          d.kernelCh.pTimer = e.pTimer;
        }
      }
      break;
    case EventType::kNetPlugin:
      if constexpr (requires { d.netPlugin; }) {
        d.netPlugin.id = 0x30001;
      }
      break;
    case EventType::kKernelPhase: fillPhase(e, d); break;
    default: fillApi(e, d); break;
  }
}

template <class Plugin, class Descr, class Args, int V>
class Driver final : public AbiDriver {
 public:
  explicit Driver(const Plugin& plugin) : p_(plugin) {}
  int version() const override { return V; }
  ncclResult_t init(void** context, int* mask, const CommSpec& comm) override {
    if constexpr (V >= 5) {
      return p_.init(context, comm.commHash, mask, comm.name.c_str(), comm.nNodes, comm.nranks,
                     comm.rank, nullptr);
    } else if constexpr (V == 4) {
      return p_.init(context, mask, comm.name.c_str(), comm.commHash, comm.nNodes, comm.nranks,
                     comm.rank, nullptr);
    } else {
      return p_.init(context, mask);
    }
  }
  ncclResult_t start(void* context, void** handle, const Event& e, void* parent) override {
    Descr d{};
    d.type = static_cast<decltype(d.type)>(typeBit(e.type));
    d.parentObj = parent;
    d.rank = e.rank;
    fill(e, d);
    return p_.startEvent(context, handle, &d);
  }
  ncclResult_t stop(void* handle) override { return p_.stopEvent(handle); }
  ncclResult_t record(void* handle, int state, uint64_t timer, bool nullArgs) override {
    Args a{};
    if constexpr (V >= 4) {
      if (state == ncclProfilerKernelChStop || state == ncclProfilerKernelPhaseStop) {
        a.kernelCh.pTimer = timer;
      } else {
        a.proxyStep.transSize = 65536;
      }
    } else {
      a.proxyOp.transSize = 65536;
      a.proxyOp.steps = 1;
    }
    return p_.recordEventState(handle, static_cast<ncclProfilerEventState_t>(state),
                               nullArgs ? nullptr : &a);
  }
  ncclResult_t finalize(void* context) override { return p_.finalize(context); }

 private:
  const Plugin& p_;
};

}  // namespace

std::unique_ptr<AbiDriver> makeDriver(int version) {
  switch (version) {
    case 7:
      return std::make_unique<Driver<ncclProfiler_v7_t, ncclProfilerEventDescr_v7_t,
                                     ncclProfilerEventStateArgs_v7_t, 7>>(ncclProfiler_v7);
    case 6:
      return std::make_unique<Driver<ncclProfiler_v6_t, ncclProfilerEventDescr_v6_t,
                                     ncclProfilerEventStateArgs_v6_t, 6>>(ncclProfiler_v6);
    case 5:
      return std::make_unique<Driver<ncclProfiler_v5_t, ncclProfilerEventDescr_v5_t,
                                     ncclProfilerEventStateArgs_v5_t, 5>>(ncclProfiler_v5);
    case 4:
      return std::make_unique<Driver<ncclProfiler_v4_t, ncclProfilerEventDescr_v4_t,
                                     ncclProfilerEventStateArgs_v4_t, 4>>(ncclProfiler_v4);
    case 3:
      return std::make_unique<Driver<ncclProfiler_v3_t, ncclProfilerEventDescr_v3_t,
                                     ncclProfilerEventStateArgs_v3_t, 3>>(ncclProfiler_v3);
    case 2:
      return std::make_unique<Driver<ncclProfiler_v2_t, ncclProfilerEventDescr_v2_t,
                                     ncclProfilerEventStateArgs_v2_t, 2>>(ncclProfiler_v2);
    case 1:
      return std::make_unique<Driver<ncclProfiler_v1_t, ncclProfilerEventDescr_v1_t,
                                     ncclProfilerEventStateArgs_v1_t, 1>>(ncclProfiler_v1);
    default: return nullptr;
  }
}

Replay::Replay(AbiDriver& driver, const CommSpec& comm) : driver_(driver), mask_(comm.maskBefore) {
  initResult_ = driver_.init(&context_, &mask_, comm);
}

Replay::~Replay() {
  finalize();
}

void Replay::finalize() {
  if (!finalized_) {
    finalized_ = true;
    if (driver_.finalize(context_) != ncclSuccess) {
      failures_.fetch_add(1);
    }
  }
}

void Replay::ensure(size_t ids) {
  if (ids <= capacity_) {
    return;
  }
  auto handles = std::make_unique<std::atomic<void*>[]>(ids);
  auto started = std::make_unique<std::atomic<bool>[]>(ids);
  for (size_t i = 0; i < ids; ++i) {
    handles[i].store(i < capacity_ ? handles_[i].load() : nullptr);
    started[i].store(i < capacity_ ? started_[i].load() : false);
  }
  handles_ = std::move(handles);
  started_ = std::move(started);
  capacity_ = ids;
}

void* Replay::handle(int id) const {
  return id >= 0 && static_cast<size_t>(id) < capacity_ ? handles_[id].load() : nullptr;
}

void Replay::apply(const Event& e) {
  const auto id = static_cast<size_t>(e.id);
  ncclResult_t r = ncclSuccess;
  switch (e.kind) {
    case EventKind::kStart: {
      void* parent = nullptr;
      if (e.parent >= 0) {
        // The parent was started by another thread: wait for it, as NCCL's
        // proxy queue makes the progress thread wait for posted ops.
        while (!started_[e.parent].load(std::memory_order_acquire)) {
          std::this_thread::yield();
        }
        parent = handles_[e.parent].load(std::memory_order_relaxed);
      }
      void* h = opaque(0xbad);  // must be overwritten
      r = driver_.start(context_, &h, e, parent);
      if (h == nullptr) {
        nullHandles_.fetch_add(1);
      }
      handles_[id].store(h, std::memory_order_relaxed);
      started_[id].store(true, std::memory_order_release);
      break;
    }
    case EventKind::kStop:
      while (!started_[id].load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      r = driver_.stop(handles_[id].load(std::memory_order_relaxed));
      break;
    case EventKind::kRecord:
      while (!started_[id].load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      r = driver_.record(handles_[id].load(std::memory_order_relaxed), e.state, e.stateTimer,
                         false);
      break;
  }
  if (r != ncclSuccess) {
    failures_.fetch_add(1);
  }
}

void Replay::run(const std::vector<Event>& events, size_t from, size_t to, bool threaded) {
  int maxId = -1;
  for (const auto& e : events) {
    maxId = std::max(maxId, std::max(e.id, e.parent));
  }
  ensure(static_cast<size_t>(maxId) + 1);
  if (!threaded) {
    for (size_t i = from; i < to; ++i) {
      apply(events[i]);
    }
    return;
  }
  std::thread progress([&] {
    for (size_t i = from; i < to; ++i) {
      if (events[i].thread == 1) {
        apply(events[i]);
      }
    }
  });
  for (size_t i = from; i < to; ++i) {
    if (events[i].thread == 0) {
      apply(events[i]);
    }
  }
  progress.join();
}

}  // namespace resilient::test
