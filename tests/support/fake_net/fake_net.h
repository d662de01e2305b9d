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
 *  "irecvConsumed": 1 = the table gets an irecvConsumed (v11 only; -1
 *                  elsewhere) that checks it is called once per completed
 *                  receive, in order. */
int fakeNetSet(const char* knob, long value);

#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_TESTS_FAKE_NET_H */
