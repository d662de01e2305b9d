// resilient-recorder-profiler-probe LIBRARY: loads LIBRARY as NCCL loads a
// profiler (dlopen, symbol ncclProfiler_v5) and drives one communicator
// through a short event sequence shaped like NCCL's: group and collective
// API events, a legacy group with a collective, a proxy op below the
// collective, a proxy step and a net-plugin event below that, a kernel
// channel that starts after its collective stopped, proxy control states,
// and a finalize. Exits 0 when every call returned ncclSuccess, 1 otherwise
// (each failure named on stderr), 2 on a usage or load error. Test
// infrastructure of the recorder (test_recorder.sh).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "nccl/profiler_v5.h"

namespace {

int failures = 0;

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) {
    std::fprintf(stderr, "profiler probe: %s returned %d\n", what, static_cast<int>(rc));
    ++failures;
  }
}

void logger(ncclDebugLogLevel level, unsigned long /*flags*/, const char* where, int line,
            const char* fmt, ...) {
  std::fprintf(stderr, "profiler probe: log level %d from %s:%d: ", static_cast<int>(level),
               where != nullptr ? where : "?", line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

ncclProfilerEventDescr_v5_t descriptor(uint64_t type, void* parent) {
  ncclProfilerEventDescr_v5_t d;
  std::memset(&d, 0, sizeof d);
  d.type = type;
  d.parentObj = parent;
  d.rank = 0;
  return d;
}

void* start(const ncclProfiler_v5_t* p, void* ctx, const ncclProfilerEventDescr_v5_t& d,
            const char* what) {
  void* handle = nullptr;
  ncclProfilerEventDescr_v5_t copy = d;
  check(p->startEvent(ctx, &handle, &copy), what);
  return handle;
}

void state(const ncclProfiler_v5_t* p, void* handle, ncclProfilerEventState_t s,
           ncclProfilerEventStateArgs_v5_t* args, const char* what) {
  check(p->recordEventState(handle, s, args), what);
}

void drive(const ncclProfiler_v5_t* p) {
  void* ctx = nullptr;
  int mask = 0;
  // A name that needs JSON escaping: quotes, a backslash, control characters,
  // UTF-8 (e-acute) and a byte that is not UTF-8.
  const char* name = "probe \"comm\"\\\n\t\x01 \xc3\xa9 \xff";
  check(p->init(&ctx, 0x1234abcd5678ef00ull, &mask, name, 1, 2, 0, logger), "init");
  std::printf("mask %d\n", mask);

  // User thread: group API, collective API, the collective itself.
  ncclProfilerEventDescr_v5_t d = descriptor(ncclProfileGroupApi, nullptr);
  d.groupApi.groupDepth = 1;
  void* groupApi = start(p, ctx, d, "start GroupApi");
  d = descriptor(ncclProfileCollApi, groupApi);
  d.collApi.func = "AllReduce";
  d.collApi.count = 1024;
  d.collApi.datatype = "ncclFloat32";
  void* collApi = start(p, ctx, d, "start CollApi");
  check(p->stopEvent(collApi), "stop CollApi");
  state(p, groupApi, ncclProfilerGroupStartApiStop, nullptr, "state GroupStartApiStop");

  d = descriptor(ncclProfileGroup, nullptr);  // the legacy group
  void* group = start(p, ctx, d, "start Group");
  d = descriptor(ncclProfileColl, group);
  d.coll.parentGroup = group;
  d.coll.seqNumber = 7;
  d.coll.func = "AllReduce";
  d.coll.count = 1024;
  d.coll.root = 0;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = 2;
  d.coll.nWarps = 16;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  void* coll = start(p, ctx, d, "start Coll");
  check(p->stopEvent(coll), "stop Coll");  // enqueued: stopped before its children start
  check(p->stopEvent(group), "stop Group");
  state(p, groupApi, ncclProfilerGroupEndApiStart, nullptr, "state GroupEndApiStart");
  check(p->stopEvent(groupApi), "stop GroupApi");

  // Progress thread: proxy op, step, net-plugin event, kernel channel.
  d = descriptor(ncclProfileProxyOp, coll);
  d.proxyOp.pid = getpid();
  d.proxyOp.channelId = 1;
  d.proxyOp.peer = 1;
  d.proxyOp.nSteps = 4;
  d.proxyOp.chunkSize = 131072;
  d.proxyOp.isSend = 1;
  void* op = start(p, ctx, d, "start ProxyOp");
  d = descriptor(ncclProfileProxyStep, op);
  d.proxyStep.step = 0;
  void* step = start(p, ctx, d, "start ProxyStep");
  ncclProfilerEventStateArgs_v5_t args;
  std::memset(&args, 0, sizeof args);
  args.proxyStep.transSize = 4096;
  state(p, step, ncclProfilerProxyStepSendGPUWait, &args, "state ProxyStepSendGPUWait");
  state(p, step, ncclProfilerProxyStepSendWait, &args, "state ProxyStepSendWait");

  int extData = 42;
  d = descriptor(ncclProfileNetPlugin, step);
  d.netPlugin.id = 0x30001;
  d.netPlugin.data = &extData;
  void* net = start(p, ctx, d, "start NetPlugin");
  args.netPlugin.data = &extData;
  state(p, net, ncclProfilerNetPluginUpdate, &args, "state NetPluginUpdate");
  check(p->stopEvent(net), "stop NetPlugin");
  check(p->stopEvent(step), "stop ProxyStep");

  d = descriptor(ncclProfileKernelCh, coll);  // the parent stopped long ago
  d.kernelCh.channelId = 1;
  d.kernelCh.pTimer = 1000;
  void* channel = start(p, ctx, d, "start KernelCh");
  args.kernelCh.pTimer = 2000;
  state(p, channel, ncclProfilerKernelChStop, &args, "state KernelChStop");
  check(p->stopEvent(channel), "stop KernelCh");
  check(p->stopEvent(op), "stop ProxyOp");

  d = descriptor(ncclProfileProxyCtrl, nullptr);
  void* ctrl = start(p, ctx, d, "start ProxyCtrl");
  args.proxyCtrl.appendedProxyOps = 3;
  state(p, ctrl, ncclProfilerProxyCtrlAppendEnd, &args, "state ProxyCtrlAppendEnd");
  check(p->stopEvent(ctrl), "stop ProxyCtrl");

  check(p->finalize(ctx), "finalize");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROFILER_LIBRARY\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "profiler probe: cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  const auto* p = static_cast<const ncclProfiler_v5_t*>(dlsym(library, "ncclProfiler_v5"));
  if (p == nullptr) {
    std::fprintf(stderr, "profiler probe: %s exports no ncclProfiler_v5\n", argv[1]);
    dlclose(library);
    return 2;
  }
  drive(p);
  dlclose(library);
  if (failures != 0) {
    std::fprintf(stderr, "profiler probe: %d calls failed\n", failures);
    return 1;
  }
  return 0;
}
