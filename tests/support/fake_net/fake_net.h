/*
 * The control interface of the fake net plugins (fake_net_plugin.cc, built
 * once per ABI version as libnccl-net-fake-v<N>.so). Besides its
 * ncclNetPlugin_v<N> struct a fake exports these C functions, which a test
 * finds with dlsym on the same library. Each library has its own state.
 */
#ifndef RESILIENT_TESTS_FAKE_NET_H
#define RESILIENT_TESTS_FAKE_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Our copies of the ABI's shapes, so that this header stays plain C. */
typedef struct {
  int ndevs;
  int devs[8];
} FakeNetVDevice;
typedef struct {
  int32_t sendCommAttr[4]; /* maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer,
                              minFlowsPerPeer */
  int32_t recvCommAttr[4];
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} FakeNetAttr;

/* Counters since the last fakeNetReset. */
typedef struct {
  int version; /* N of the exported ncclNetPlugin_vN (0: none exported) */
  int initCalls;
  int finalizeCalls; /* v11 only: older versions have no finalize */
  int devicesCalls;
  int getPropertiesCalls;
  int listenCalls;
  int connectCalls;
  int acceptCalls;
  int regMrCalls;
  int deregMrCalls;
  int isendCalls;
  int irecvCalls;
  int iflushCalls;
  int testCalls;
  int closeSendCalls;
  int closeRecvCalls;
  int closeListenCalls;
  int liveContexts; /* v11 contexts not finalized */
  int liveComms;    /* listen, send and recv comms not closed */
  int liveRequests; /* requests not yet reported done */
  int liveMhandles;
  int logCalls;         /* messages the plugin sent to the logger it was given */
  int profilerCalls;    /* profiler callback invocations (v10+, with a phandle) */
  int lastTrafficClass; /* config seen by init (v11) or connect (v10); -2: none seen */
  uint64_t lastCommId;  /* v11 init */
  size_t lastIsendSize;
  void* lastPhandle;     /* phandle of the last isend */
  void* lastRecvPhandle; /* phandles[0] of the last irecv (NULL if phandles was NULL) */
  int lastRecvN;
  int lastRecvTags[8];
  size_t lastRecvSizes[8];
  void* lastRecvRequestIn;    /* what *request held when the last irecv was called */
  int dataCallsOnSetupThread; /* isend/irecv/test on a thread that ran listen/connect/accept/regMr */
  int recvsCompleted;     /* receives test() reported done */
  int irecvConsumedCalls;
  int irecvConsumedWrong; /* not the oldest completed receive of the comm, or a bad comm */
  /* regMrDmaBuf (knob "dmabuf"): what the last call got; the inode is the
   * fd's st_ino at call time (the caller closes the fd right after). */
  int regMrDmaBufCalls;
  int lastDmaBufFd;
  int lastDmaBufType;
  uint64_t lastDmaBufOffset;
  size_t lastDmaBufSize;
  uint64_t lastDmaBufInode;
  /* makeVDevice (knob "fusion", v9+): the last fused device set. */
  int makeVDeviceCalls;
  FakeNetVDevice lastVDevice;
  /* getDeviceMr (knob "getDeviceMr", v7+). */
  int getDeviceMrCalls;
  void* lastDeviceMr; /* what the last successful call returned */
  /* setNetAttr (knob "netAttr", v11+). */
  int setNetAttrCalls;
  FakeNetAttr lastNetAttr;
  void* lastNetAttrCtx; /* the ctx setNetAttr got */
  void* lastInitCtx;    /* the ctx the last v11+ init returned */
  /* The device-handle out-pointer of connect/accept (v7+): whether it was
   * NULL, and what it pointed at on entry when it was not. */
  int connectDevCommNull; /* connects (that made a comm) with a NULL out-pointer */
  int acceptDevCommNull;  /* accepts (that made a comm) with a NULL out-pointer */
  void* lastConnectDevCommIn;
  void* lastAcceptDevCommIn;
  void* lastConnectDevCommOut; /* what it pointed at on return */
  void* lastAcceptDevCommOut;
} FakeNetStats;

typedef void (*FakeNetStatsFn)(FakeNetStats* out);
typedef void (*FakeNetResetFn)(void);
typedef void (*FakeNetFailNextFn)(const char* call, int result);
typedef int (*FakeNetSetFn)(const char* knob, long value);
typedef int (*FakeNetLogFn)(int level, const char* text);

/* Copies the counters. */
void fakeNetStats(FakeNetStats* out);
/* Zeroes the counters, failures and knobs; live objects are forgotten (leaked). */
void fakeNetReset(void);
/* The next call of `call` ("init", "isend", "test", ...) returns `result`
 * without doing anything else. */
void fakeNetFailNext(const char* call, int result);
/* Logs `text` at `level` (NCCL_LOG_WARN, ...) through the logger init was
 * given, as a plugin does from its own progress (aws-ofi-nccl reports each
 * errored completion of its queue); returns -1 without a logger. */
int fakeNetLog(int level, const char* text);
/* Knobs; returns 0, or -1 for an unknown knob:
 *  "connectPolls": connect returns a NULL comm this many times per handle
 *                  before it connects (default 1; 0 connects at once);
 *  "deviceHandle": 1 = connect/accept (v7+) return a non-NULL device handle;
 *  "deviceType":   netDeviceType reported by getProperties (v7+);
 *  "maxRequests":  outstanding requests per comm before isend/irecv return
 *                  a NULL request (default 32, 8 for v6);
 *  "fillHandle":   1 = listen fills all 128 handle bytes;
 *  "hostMemory":   0 = ptrSupport without NCCL_PTR_HOST;
 *  "reportSizes":  0 = test() never writes `sizes` (send or receive);
 *  "garbageSendSize": 1 = test() of a send writes -12345 as its size;
 *  "wrongRecvSize": 1 = test() of a receive reports one byte more than arrived;
 *  "inProgress":   1 = every successful call returns ncclInProgress;
 *  "busyEvery":    k = every k-th isend/irecv returns a NULL request;
 *  "irecvConsumed": 1 = the table gets an irecvConsumed (v7+; -1 before)
 *                  that checks it is called once per completed receive, in
 *                  order;
 *  "dmabuf":       1 = the table gets regMrDmaBuf and ptrSupport has
 *                  NCCL_PTR_DMABUF; regMrDmaBuf fails with
 *                  ncclInvalidArgument unless fstat of its fd succeeds;
 *  "ports":        n = this many physical devices (default 2, at most 8);
 *  "fusion":       1 = the table gets makeVDevice (v9+; -1 before), which
 *                  appends a virtual device that devices() counts;
 *  "getDeviceMr":  1 = the table gets getDeviceMr (v7+; -1 before);
 *  "netAttr":      1 = the table gets setNetAttr (v11+; -1 before);
 *  "stallRecv":    1 = receives never complete (test() says not done).
 * The table's members are set by the knob (and cleared by fakeNetReset):
 * set them before init, as NCCL and the wrapper read the table after it.
 * The lazy v11 variant applies them in its init. */
int fakeNetSet(const char* knob, long value);

#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_TESTS_FAKE_NET_H */
