// The recorder's profiler plugin: ncclProfiler_v5 named "Recorder". Every
// call is appended as one line to $RESILIENT_RECORDER_DIR/profiler-<pid>.jsonl
// and, when RESILIENT_RECORDER_PROFILER_INNER names a library, forwarded to
// that library's ncclProfiler_v5 (whose init sets the activation mask);
// without an inner profiler the mask enables every v5 event type.
//
// Each startEvent returns a handle of ours, {id, the inner handle, type},
// kept until its communicator's finalize (NCCL may name a parent after the
// parent stopped, so a handle is never freed earlier). parentObj and the
// coll/p2p parentGroup are translated back to the inner handles before
// forwarding; a proxyOp of another process (PXN: pid not ours) keeps its
// parentObj as it is, since it is not one of our handles. Our handles live
// in blocks whose address ranges are indexed, so a handle is recognised as
// ours without dereferencing anything.
//
// Once recording has stopped (the line cap, or no RESILIENT_RECORDER_DIR),
// new events get the inner handle itself: memory stops growing, and the
// index tells the two kinds of handle apart.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl/profiler_v5.h"
#include "tests/gpu/recorder/jsonl_log.h"
#include "tests/gpu/recorder/process_state.h"
#include "tests/gpu/recorder/warn.h"

extern "C" {
extern __attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5;
}

namespace resilient::recorder {
namespace {

constexpr const char* kInnerEnv = "RESILIENT_RECORDER_PROFILER_INNER";

// Every event type of the v5 ABI.
constexpr int kAllEvents = ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                           ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileProxyCtrl |
                           ncclProfileKernelCh | ncclProfileNetPlugin | ncclProfileGroupApi |
                           ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch;

struct Handle {
  uint64_t id = 0;
  void* inner = nullptr;  // what the inner profiler returned (NULL without one)
  uint64_t type = 0;
};

constexpr size_t kBlockHandles = 1024;

struct HandleBlock {
  std::array<Handle, kBlockHandles> items{};
  size_t used = 0;
};

struct Context {
  uint64_t id = 0;
  void* inner = nullptr;
  uint64_t events = 0;
  std::vector<std::unique_ptr<HandleBlock>> blocks;
};

// Process-wide state, created by the first init; never destroyed while a
// context is open (see UnloadGuard).
class ProfilerState {
 public:
  ProfilerState() = default;
  ~ProfilerState() {
    if (library != nullptr) {
      dlclose(library);
    }
  }
  ProfilerState(const ProfilerState&) = delete;
  ProfilerState& operator=(const ProfilerState&) = delete;

  JsonlLog log{"profiler"};
  std::atomic<const ncclProfiler_v5_t*> inner{nullptr};
  std::atomic<bool> wrapped{false};  // a handle of ours was ever returned
  const pid_t pid = getpid();

  std::mutex mu;  // guards everything below
  void* library = nullptr;
  std::string innerPath;
  uint64_t lastContext = 0;
  uint64_t lastEvent = 0;
  std::unordered_map<void*, std::unique_ptr<Context>> contexts;  // key: the Context itself
  Context orphans;  // events started with context NULL (a failed init); freed with the state
  std::map<uintptr_t, HandleBlock*> blockIndex;  // address of items[0] -> block
};

using State = ProcessState<ProfilerState>;

const char* typeName(uint64_t type) {
  switch (type) {
    case ncclProfileGroup: return "Group";
    case ncclProfileColl: return "Coll";
    case ncclProfileP2p: return "P2p";
    case ncclProfileProxyOp: return "ProxyOp";
    case ncclProfileProxyStep: return "ProxyStep";
    case ncclProfileProxyCtrl: return "ProxyCtrl";
    case ncclProfileKernelCh: return "KernelCh";
    case ncclProfileNetPlugin: return "NetPlugin";
    case ncclProfileGroupApi: return "GroupApi";
    case ncclProfileCollApi: return "CollApi";
    case ncclProfileP2pApi: return "P2pApi";
    case ncclProfileKernelLaunch: return "KernelLaunch";
    default: return nullptr;
  }
}

void addType(JsonFields& f, uint64_t type) {
  const char* name = typeName(type);
  if (name != nullptr) {
    f.add("type", name);
  } else {
    f.add("type", type);  // not a v5 type: the number
  }
}

const char* stateName(int state) {
  static constexpr std::array<const char*, 25> kNames = {
      "ProxyOpSendPosted",      "ProxyOpSendRemFifoWait", "ProxyOpSendTransmitted",
      "ProxyOpSendDone",        "ProxyOpRecvPosted",      "ProxyOpRecvReceived",
      "ProxyOpRecvTransmitted", "ProxyOpRecvDone",        "ProxyStepSendGPUWait",
      "ProxyStepSendWait",      "ProxyStepRecvWait",      "ProxyStepRecvFlushWait",
      "ProxyStepRecvGPUWait",   "ProxyCtrlIdle",          "ProxyCtrlActive",
      "ProxyCtrlSleep",         "ProxyCtrlWakeup",        "ProxyCtrlAppend",
      "ProxyCtrlAppendEnd",     "ProxyOpInProgress_v4",   "ProxyStepSendPeerWait_v4",
      "NetPluginUpdate",        "KernelChStop",           "GroupStartApiStop",
      "GroupEndApiStart"};
  return state >= 0 && static_cast<size_t>(state) < kNames.size() ? kNames[state] : nullptr;
}

// Our handle at address p, or nullptr when p is not one (s.mu held).
Handle* ours(ProfilerState& s, void* p) {
  if (p == nullptr || s.blockIndex.empty()) {
    return nullptr;
  }
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = s.blockIndex.upper_bound(address);
  if (it == s.blockIndex.begin()) {
    return nullptr;
  }
  --it;
  HandleBlock* block = it->second;
  const uintptr_t offset = address - it->first;
  if (offset % sizeof(Handle) != 0 || offset / sizeof(Handle) >= block->used) {
    return nullptr;
  }
  return &block->items[offset / sizeof(Handle)];
}

// A new handle in `ctx` (s.mu held); may throw std::bad_alloc.
Handle* newHandle(ProfilerState& s, Context& ctx) {
  if (ctx.blocks.empty() || ctx.blocks.back()->used == kBlockHandles) {
    auto block = std::make_unique<HandleBlock>();
    const auto address = reinterpret_cast<uintptr_t>(block->items.data());
    ctx.blocks.reserve(ctx.blocks.size() + 1);
    s.blockIndex.emplace(address, block.get());
    ctx.blocks.push_back(std::move(block));
  }
  HandleBlock& block = *ctx.blocks.back();
  ++ctx.events;
  return &block.items[block.used++];
}

Context* contextOf(ProfilerState& s, void* context) {
  const auto it = s.contexts.find(context);
  return it == s.contexts.end() ? nullptr : it->second.get();
}

// Loads the inner profiler named by kInnerEnv, once (s.mu held). Returns the
// error text; an empty text with no inner means "none configured".
std::string loadInner(ProfilerState& s) {
  if (s.inner.load() != nullptr) {
    return {};
  }
  const char* path = getenv(kInnerEnv);  // NOLINT(concurrency-mt-unsafe): read under s.mu
  if (path == nullptr || *path == '\0') {
    return {};
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe): per-thread in glibc
    return std::string(kInnerEnv) + "=" + path +
           ": cannot load the profiler plugin: " + (why != nullptr ? why : "unknown dlopen error");
  }
  const auto* p = static_cast<const ncclProfiler_v5_t*>(dlsym(library, "ncclProfiler_v5"));
  std::string error;
  if (p == nullptr) {
    error = std::string(kInnerEnv) + "=" + path +
            ": the library exports no ncclProfiler_v5 (the recorder forwards ABI v5 only)";
  } else if (p == &ncclProfiler_v5) {
    error = std::string(kInnerEnv) + "=" + path + " is the recorder itself";
  } else if (p->init == nullptr || p->startEvent == nullptr || p->stopEvent == nullptr ||
             p->recordEventState == nullptr || p->finalize == nullptr) {
    error = std::string(kInnerEnv) + "=" + path + ": its ncclProfiler_v5 has a NULL member";
  }
  if (!error.empty()) {
    dlclose(library);
    return error;
  }
  s.library = library;
  s.innerPath = path;
  s.inner.store(p, std::memory_order_release);
  return {};
}

ncclResult_t init(void** context, uint64_t commHash, int* eActivationMask, const char* commName,
                  int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) noexcept {
  if (context != nullptr) {
    *context = nullptr;
  }
  ProfilerState* s = nullptr;
  std::string error;
  try {
    s = &State::acquire();
    std::lock_guard<std::mutex> lock(s->mu);
    error = loadInner(*s);
  } catch (...) {
    warn(logfn, NCCL_PROFILE | NCCL_INIT, "PROFILER/Recorder: init: out of memory");
    return ncclInternalError;
  }
  const int maskIn = eActivationMask != nullptr ? *eActivationMask : 0;
  if (!error.empty()) {
    warn(logfn, NCCL_PROFILE | NCCL_INIT, "PROFILER/Recorder: %s", error.c_str());
    s->log.record("init", [&](JsonFields& f) {
      f.addNull("ctx").addHex("commId", commHash).add("error", error.c_str());
      f.addResult(static_cast<int>(ncclInvalidUsage));
    });
    return ncclInvalidUsage;
  }
  const ncclProfiler_v5_t* inner = s->inner.load(std::memory_order_acquire);
  void* innerCtx = nullptr;
  ncclResult_t rc = ncclSuccess;
  if (inner != nullptr) {
    rc = inner->init(&innerCtx, commHash, eActivationMask, commName, nNodes, nranks, rank, logfn);
  } else if (eActivationMask != nullptr) {
    *eActivationMask = kAllEvents;
  }
  uint64_t id = 0;
  if (rc == ncclSuccess || innerCtx != nullptr) {
    try {
      auto ctx = std::make_unique<Context>();
      ctx->inner = innerCtx;
      std::lock_guard<std::mutex> lock(s->mu);
      id = ctx->id = ++s->lastContext;
      void* key = ctx.get();
      s->contexts.emplace(key, std::move(ctx));
      if (context != nullptr) {
        *context = key;
      }
    } catch (...) {
      // Without a context of ours, NCCL gets the inner one (events then go unwrapped).
      if (context != nullptr) {
        *context = innerCtx;
      }
    }
  }
  s->log.record("init", [&](JsonFields& f) {
    f.addId("ctx", id).addHex("commId", commHash).add("commName", commName);
    f.add("nNodes", nNodes).add("nranks", nranks).add("rank", rank);
    f.add("maskIn", maskIn);
    if (eActivationMask != nullptr) {
      f.add("mask", *eActivationMask);
    } else {
      f.addNull("mask");
    }
    if (inner != nullptr) {
      f.add("inner", s->innerPath.c_str()).add("innerName", inner->name);
    } else {
      f.addNull("inner");
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

// The descriptor's members of its type.
void addDescriptor(JsonFields& f, const ncclProfilerEventDescr_v5_t& d) {
  switch (d.type) {
    case ncclProfileColl:
      f.add("seqNumber", d.coll.seqNumber).add("func", d.coll.func);
      f.add("datatype", d.coll.datatype).add("algo", d.coll.algo).add("proto", d.coll.proto);
      f.add("count", d.coll.count).add("root", d.coll.root);
      f.add("nChannels", d.coll.nChannels).add("nWarps", d.coll.nWarps);
      break;
    case ncclProfileP2p:
      f.add("func", d.p2p.func).add("datatype", d.p2p.datatype).add("count", d.p2p.count);
      f.add("peer", d.p2p.peer).add("nChannels", d.p2p.nChannels);
      break;
    case ncclProfileProxyOp:
      f.add("pid", d.proxyOp.pid).add("channelId", d.proxyOp.channelId);
      f.add("peer", d.proxyOp.peer).add("nSteps", d.proxyOp.nSteps);
      f.add("chunkSize", d.proxyOp.chunkSize).add("isSend", d.proxyOp.isSend);
      break;
    case ncclProfileProxyStep: f.add("step", d.proxyStep.step); break;
    case ncclProfileKernelCh:
      f.add("channelId", d.kernelCh.channelId).add("pTimer", d.kernelCh.pTimer);
      break;
    case ncclProfileNetPlugin:
      f.add("pluginId", d.netPlugin.id).add("data", d.netPlugin.data != nullptr);
      break;
    case ncclProfileGroupApi:
      f.add("graphCaptured", d.groupApi.graphCaptured).add("groupDepth", d.groupApi.groupDepth);
      break;
    case ncclProfileCollApi:
      f.add("func", d.collApi.func).add("datatype", d.collApi.datatype);
      f.add("count", d.collApi.count).add("root", d.collApi.root);
      f.add("stream", d.collApi.stream != nullptr).add("graphCaptured", d.collApi.graphCaptured);
      break;
    case ncclProfileP2pApi:
      f.add("func", d.p2pApi.func).add("datatype", d.p2pApi.datatype);
      f.add("count", d.p2pApi.count);
      f.add("stream", d.p2pApi.stream != nullptr).add("graphCaptured", d.p2pApi.graphCaptured);
      break;
    case ncclProfileKernelLaunch: f.add("stream", d.kernelLaunch.stream != nullptr); break;
    default: break;  // Group, ProxyCtrl: no members
  }
}

// How a parent pointer (parentObj, parentGroup) was passed on.
struct ParentRef {
  uint64_t id = 0;       // our handle's id, 0 if not ours
  bool foreign = false;  // non-NULL and not ours: passed on unchanged
};

// Translates `*p` in place to the inner handle when it is ours (s.mu held).
ParentRef translate(ProfilerState& s, void** p) {
  ParentRef ref;
  if (*p == nullptr) {
    return ref;
  }
  if (const Handle* h = ours(s, *p)) {
    ref.id = h->id;
    *p = h->inner;
  } else {
    ref.foreign = true;
  }
  return ref;
}

void addParent(JsonFields& f, const char* name, const ParentRef& ref) {
  f.addId(name, ref.id);
  if (ref.foreign) {
    f.add(std::string(name).append("Foreign").c_str(), true);
  }
}

ncclResult_t startEvent(void* context, void** eHandle,
                        ncclProfilerEventDescr_v5_t* eDescr) noexcept {
  ProfilerState* s = State::current();
  void* unused = nullptr;
  void** out = eHandle != nullptr ? eHandle : &unused;
  *out = nullptr;
  if (s == nullptr || eDescr == nullptr) {
    return ncclSuccess;  // no init yet, or nothing to describe
  }
  const ncclProfiler_v5_t* inner = s->inner.load(std::memory_order_acquire);
  const bool recording = s->log.recording();
  ncclProfilerEventDescr_v5_t d = *eDescr;
  ParentRef parent, group;
  uint64_t ctxId = 0;
  void* innerCtx = context;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (const Context* ctx = contextOf(*s, context)) {
      ctxId = ctx->id;
      innerCtx = ctx->inner;
    }
    if (s->wrapped.load(std::memory_order_relaxed)) {
      // A PXN proxyOp of another process: its parentObj is not ours.
      const bool pxn = d.type == ncclProfileProxyOp && d.proxyOp.pid != s->pid;
      if (pxn) {
        parent.foreign = d.parentObj != nullptr;
      } else {
        parent = translate(*s, &d.parentObj);
      }
      if (d.type == ncclProfileColl) {
        group = translate(*s, &d.coll.parentGroup);
      } else if (d.type == ncclProfileP2p) {
        group = translate(*s, &d.p2p.parentGroup);
      }
    } else {
      parent.foreign = d.parentObj != nullptr;
    }
  }
  void* innerHandle = nullptr;
  const ncclResult_t rc =
      inner != nullptr ? inner->startEvent(innerCtx, &innerHandle, &d) : ncclSuccess;
  if (!recording) {
    *out = innerHandle;  // recording stopped: no handle of ours, the inner one as it is
    return rc;
  }
  uint64_t id = 0;
  try {
    std::lock_guard<std::mutex> lock(s->mu);
    // No context of ours (or one finalized meanwhile): the handle goes with the orphans.
    Context* owner = contextOf(*s, context);
    Handle* h = newHandle(*s, owner != nullptr ? *owner : s->orphans);
    id = h->id = ++s->lastEvent;
    h->inner = innerHandle;
    h->type = eDescr->type;
    s->wrapped.store(true, std::memory_order_relaxed);
    *out = h;
  } catch (...) {
    *out = innerHandle;
    return rc;
  }
  s->log.record("start", [&](JsonFields& f) {
    f.addId("ctx", ctxId);
    addType(f, eDescr->type);
    f.add("id", id);
    addParent(f, "parent", parent);
    f.add("rank", eDescr->rank);
    if (d.type == ncclProfileColl || d.type == ncclProfileP2p) {
      addParent(f, "parentGroup", group);
    }
    addDescriptor(f, *eDescr);
    f.add("innerHandle", innerHandle != nullptr);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

// Our handle's id and type, and the handle to pass on (s.mu taken).
struct Resolved {
  uint64_t id = 0;
  uint64_t type = 0;
  void* inner = nullptr;
  bool foreign = false;
};

Resolved resolve(ProfilerState& s, void* eHandle) {
  Resolved r;
  r.inner = eHandle;
  if (eHandle == nullptr || !s.wrapped.load(std::memory_order_relaxed)) {
    r.foreign = eHandle != nullptr;
    return r;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (const Handle* h = ours(s, eHandle)) {
    r.id = h->id;
    r.type = h->type;
    r.inner = h->inner;
  } else {
    r.foreign = true;
  }
  return r;
}

void addHandle(JsonFields& f, const Resolved& r) {
  f.addId("id", r.id);
  if (r.type != 0) {
    addType(f, r.type);
  }
  if (r.foreign) {
    f.add("foreign", true);
  }
}

ncclResult_t stopEvent(void* eHandle) noexcept {
  ProfilerState* s = State::current();
  if (s == nullptr) {
    return ncclSuccess;
  }
  const ncclProfiler_v5_t* inner = s->inner.load(std::memory_order_acquire);
  const Resolved r = resolve(*s, eHandle);
  const ncclResult_t rc = inner != nullptr ? inner->stopEvent(r.inner) : ncclSuccess;
  s->log.record("stop", [&](JsonFields& f) {
    addHandle(f, r);
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_t eState,
                              ncclProfilerEventStateArgs_v5_t* eStateArgs) noexcept {
  ProfilerState* s = State::current();
  if (s == nullptr) {
    return ncclSuccess;
  }
  const ncclProfiler_v5_t* inner = s->inner.load(std::memory_order_acquire);
  const Resolved r = resolve(*s, eHandle);
  const ncclResult_t rc =
      inner != nullptr ? inner->recordEventState(r.inner, eState, eStateArgs) : ncclSuccess;
  s->log.record("state", [&](JsonFields& f) {
    addHandle(f, r);
    const int state = static_cast<int>(eState);
    f.add("state", state);
    if (const char* name = stateName(state)) {
      f.add("stateName", name);
    }
    if (eStateArgs == nullptr) {
      f.addNull("args");
    } else {
      switch (eState) {
        case ncclProfilerProxyStepSendGPUWait:
        case ncclProfilerProxyStepSendWait:
        case ncclProfilerProxyStepRecvWait:
        case ncclProfilerProxyStepRecvFlushWait:
        case ncclProfilerProxyStepRecvGPUWait:
        case ncclProfilerProxyStepSendPeerWait_v4:
          f.add("transSize", eStateArgs->proxyStep.transSize);
          break;
        case ncclProfilerProxyCtrlIdle:
        case ncclProfilerProxyCtrlActive:
        case ncclProfilerProxyCtrlSleep:
        case ncclProfilerProxyCtrlWakeup:
        case ncclProfilerProxyCtrlAppend:
        case ncclProfilerProxyCtrlAppendEnd:
          f.add("appendedProxyOps", eStateArgs->proxyCtrl.appendedProxyOps);
          break;
        case ncclProfilerNetPluginUpdate:
          f.add("data", eStateArgs->netPlugin.data != nullptr);
          break;
        case ncclProfilerKernelChStop: f.add("pTimer", eStateArgs->kernelCh.pTimer); break;
        default: break;  // no arguments apply
      }
    }
    f.addResult(static_cast<int>(rc));
  });
  return rc;
}

ncclResult_t finalize(void* context) noexcept {
  ProfilerState* s = State::current();
  if (s == nullptr) {
    return ncclSuccess;
  }
  const ncclProfiler_v5_t* inner = s->inner.load(std::memory_order_acquire);
  std::unique_ptr<Context> ctx;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    const auto it = s->contexts.find(context);
    if (it != s->contexts.end()) {
      ctx = std::move(it->second);
      s->contexts.erase(it);
    }
  }
  void* innerCtx = ctx != nullptr ? ctx->inner : context;
  const ncclResult_t rc = inner != nullptr ? inner->finalize(innerCtx) : ncclSuccess;
  if (ctx != nullptr) {
    std::lock_guard<std::mutex> lock(s->mu);
    for (const auto& block : ctx->blocks) {
      s->blockIndex.erase(reinterpret_cast<uintptr_t>(block->items.data()));
    }
  }
  s->log.record("finalize", [&](JsonFields& f) {
    f.addId("ctx", ctx != nullptr ? ctx->id : 0);
    f.add("events", ctx != nullptr ? ctx->events : 0);
    f.addResult(static_cast<int>(rc));
  });
  ctx.reset();  // the handles of this communicator
  s->log.flush();
  return rc;
}

}  // namespace
}  // namespace resilient::recorder

extern "C" __attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = {
    "Recorder",
    resilient::recorder::init,
    resilient::recorder::startEvent,
    resilient::recorder::stopEvent,
    resilient::recorder::recordEventState,
    resilient::recorder::finalize,
};
