// The host engine's profiler client (profiler_events.h): the one file of the
// host engine that sees NCCL's profiler ABI (ncclProfiler_v6_t, our own
// declaration), as plugin/transport/external/adapt_v*.cc see the net ABI. The
// emission rules are NCCL 2.28's (docs/reference/nccl-abi.md §2.6, §2.7): which
// mask bits start which event (a child's bit also starts the parents that
// carry it), which handle is whose parent, and that only a started event is
// stopped or gets a state.
#include "hostengine/profiler_events.h"

#include <dlfcn.h>

#include <string>

#include "common/log.h"
#include "hostengine/plugin_log.h"
#include "nccl/profiler_v6.h"
#include "plugin/transport/external/external_transport.h"

namespace resilient::hostengine {
namespace {

// The symbol looked up in the net plugin's library (NCCL 2.29+ looks for it
// first; our plugin exports it beside _v5 .. _v1).
constexpr const char* kProfilerSymbol = "ncclProfiler_v6";

// NCCL's activation mask: one int for the whole process, written by every
// init (last writer wins), read when an operation is enqueued. Constant
// initialized: nothing runs at load time.
int gEventMask = 0;

// Which mask bits make NCCL emit an event: the event's own bit, or a child's
// that needs it as a parent.
constexpr int kGroupApiBits = ncclProfileGroupApi | ncclProfileP2pApi | ncclProfileCollApi |
                              ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl |
                              ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
                              ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kCollApiBits = ncclProfileCollApi | ncclProfileColl | ncclProfileProxyOp |
                             ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kGroupBits = ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                           ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
                           ncclProfileNetPlugin;
constexpr int kCollBits = ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep |
                          ncclProfileKernelCh | ncclProfileNetPlugin;

const char* funcName(ProfiledFunc func) noexcept {
  switch (func) {
    case ProfiledFunc::kBroadcast: return "Broadcast";
    case ProfiledFunc::kAllReduce: return "AllReduce";
    case ProfiledFunc::kSendRecv: return "SendRecv";
    case ProfiledFunc::kAllToAll: return "AlltoAll";
  }
  return "Invalid";
}

// ProfilerTable stays incomplete: a pointer to one is a pointer to an
// ncclProfiler_v6_t that went through the header's opaque type.
const ncclProfiler_v6_t& abiOf(const ProfilerTable* table) noexcept {
  return *reinterpret_cast<const ncclProfiler_v6_t*>(table);
}

// A table NCCL could drive: the calls the host engine makes are all there.
bool usable(const ncclProfiler_v6_t& abi) noexcept {
  return abi.init != nullptr && abi.startEvent != nullptr && abi.stopEvent != nullptr &&
         abi.recordEventState != nullptr;
}

// Clears this thread's dl error text (dlerror's state is per thread in glibc).
void clearDlError() noexcept {
  (void)dlerror();  // NOLINT(concurrency-mt-unsafe): per-thread state in glibc
}

// The ncclProfiler_v6 of the library `transport` was loaded from, with a
// reference of our own on that library (dlopen RTLD_NOLOAD: it is loaded
// already, and stays loaded until our finalize returned); nullptr when the
// transport is not a loaded net plugin or its library exports none.
const ProfilerTable* findInLibrary(transport::Transport& transport, void** library) noexcept {
  const auto* external = dynamic_cast<const transport::external::ExternalTransport*>(&transport);
  if (external == nullptr) {
    return nullptr;
  }
  const std::string& path = external->libraryPath();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) {
    clearDlError();
    RES_INFO(NCCL_INIT, "host engine: cannot reach the net plugin library %s again: no profiler",
             path.c_str());
    return nullptr;
  }
  const void* symbol = dlsym(handle, kProfilerSymbol);
  if (symbol == nullptr) {
    clearDlError();
    dlclose(handle);
    RES_INFO(NCCL_INIT, "host engine: %s exports no %s: operations are not profiled", path.c_str(),
             kProfilerSymbol);
    return nullptr;
  }
  *library = handle;
  return static_cast<const ProfilerTable*>(symbol);
}

}  // namespace

void ProfilerEvents::open(transport::Transport& transport, const ProfilerTable* table,
                          const ProfiledComm& comm) noexcept {
  close();
  void* library = nullptr;
  const ProfilerTable* found = table != nullptr ? table : findInLibrary(transport, &library);
  if (found == nullptr) {
    return;
  }
  const ncclProfiler_v6_t& abi = abiOf(found);
  const char* name = abi.name != nullptr ? abi.name : "?";
  void* context = nullptr;
  const bool complete = usable(abi);
  const ncclResult_t result = complete
                                  ? abi.init(&context, comm.commId, &gEventMask, comm.name,
                                             comm.nNodes, comm.nranks, comm.rank, pluginLogger())
                                  : ncclInvalidUsage;
  if (result != ncclSuccess) {
    if (complete) {
      RES_WARN(NCCL_INIT | NCCL_PROFILE,
               "host engine: profiler %s: init of communicator 0x%llx failed (error %d); the "
               "engine continues without profiler",
               name, static_cast<unsigned long long>(comm.commId), static_cast<int>(result));
    } else {
      RES_WARN(NCCL_INIT | NCCL_PROFILE,
               "host engine: profiler %s lacks init, startEvent, stopEvent or recordEventState; "
               "the engine continues without profiler",
               name);
    }
    if (library != nullptr) {
      dlclose(library);
    }
    return;
  }
  table_ = found;
  library_ = library;
  context_ = context;
  rank_ = comm.rank;
  seqNumbers_.fill(0);
  opMask_ = 0;
  coll_ = kernel_ = nullptr;
  RES_INFO(NCCL_INIT | NCCL_PROFILE,
           "host engine: profiler %s on communicator 0x%llx rank %d of %d (event mask 0x%x)", name,
           static_cast<unsigned long long>(comm.commId), comm.rank, comm.nranks,
           __atomic_load_n(&gEventMask, __ATOMIC_RELAXED));
}

void ProfilerEvents::close() noexcept {
  if (table_ != nullptr) {
    const ncclProfiler_v6_t& abi = abiOf(table_);
    if (context_ != nullptr && abi.finalize != nullptr) {
      (void)abi.finalize(context_);
    }
  }
  if (library_ != nullptr) {
    dlclose(library_);
  }
  table_ = nullptr;
  library_ = nullptr;
  context_ = nullptr;
  coll_ = kernel_ = nullptr;
}

void ProfilerEvents::enqueued(const ProfiledColl& coll) noexcept {
  coll_ = kernel_ = nullptr;
  opMask_ = 0;
  if (table_ == nullptr) {
    return;
  }
  const ncclProfiler_v6_t& abi = abiOf(table_);
  const int mask = __atomic_load_n(&gEventMask, __ATOMIC_RELAXED);
  opMask_ = mask;
  const char* func = funcName(coll.func);
  const auto slot = static_cast<size_t>(coll.func);

  // The user thread: ncclAllReduce(...) inside NCCL's implicit group.
  void* groupApi = nullptr;
  void* collApi = nullptr;
  if ((mask & kGroupApiBits) != 0) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileGroupApi;
    d.groupApi.groupDepth = 1;
    (void)abi.startEvent(context_, &groupApi, &d);
    if (groupApi != nullptr) {
      (void)abi.recordEventState(groupApi, ncclProfilerGroupStartApiStop, nullptr);
    }
  }
  if ((mask & kCollApiBits) != 0) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileCollApi;
    d.parentObj = groupApi;
    d.collApi.func = func;
    d.collApi.count = coll.count;
    d.collApi.datatype = coll.datatype;
    d.collApi.root = coll.root;
    (void)abi.startEvent(context_, &collApi, &d);
  }
  if (groupApi != nullptr) {
    (void)abi.recordEventState(groupApi, ncclProfilerGroupEndApiStart, nullptr);
  }
  if ((mask & ncclProfileKernelLaunch) != 0) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileKernelLaunch;
    d.parentObj = groupApi;
    void* launch = nullptr;
    (void)abi.startEvent(context_, &launch, &d);
    if (launch != nullptr) {
      (void)abi.stopEvent(launch);
    }
  }

  // The plan's host task: the legacy group and the collective, stopped once
  // "enqueued" (the engine's data movement comes next).
  void* group = nullptr;
  if ((mask & kGroupBits) != 0) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileGroup;
    (void)abi.startEvent(context_, &group, &d);
  }
  if ((mask & kCollBits) != 0) {
    ncclProfilerEventDescr_v6_t d{};
    d.type = ncclProfileColl;
    d.parentObj = collApi;
    d.rank = rank_;
    d.coll.seqNumber = seqNumbers_[slot];
    d.coll.func = func;
    d.coll.sendBuff = coll.sendBuff;
    d.coll.recvBuff = coll.recvBuff;
    d.coll.count = coll.count;
    d.coll.root = coll.root;
    d.coll.datatype = coll.datatype;
    d.coll.nChannels = 1;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    d.coll.parentGroup = group;
    (void)abi.startEvent(context_, &coll_, &d);
  }
  ++seqNumbers_[slot];  // counted with or without events, as NCCL counts for RAS
  if (coll_ != nullptr) {
    (void)abi.stopEvent(coll_);
  }
  if (group != nullptr) {
    (void)abi.stopEvent(group);
  }
  if (groupApi != nullptr) {
    (void)abi.stopEvent(groupApi);
  }
  if (collApi != nullptr) {
    (void)abi.stopEvent(collApi);
  }
}

void ProfilerEvents::started() noexcept {
  kernel_ = nullptr;
  if (table_ == nullptr || (opMask_ & ncclProfileKernelCh) == 0) {
    return;
  }
  ncclProfilerEventDescr_v6_t d{};
  d.type = ncclProfileKernelCh;
  d.parentObj = coll_;
  d.kernelCh.channelId = 0;
  d.kernelCh.pTimer = 0;  // no GPU: no %globaltimer
  (void)abiOf(table_).startEvent(context_, &kernel_, &d);
}

void ProfilerEvents::completed() noexcept {
  if (table_ == nullptr || kernel_ == nullptr) {
    return;
  }
  const ncclProfiler_v6_t& abi = abiOf(table_);
  ncclProfilerEventStateArgs_v6_t args{};
  args.kernelCh.pTimer = 0;
  (void)abi.recordEventState(kernel_, ncclProfilerKernelChStop, &args);
  (void)abi.stopEvent(kernel_);
  kernel_ = nullptr;
}

}  // namespace resilient::hostengine
