/*
 * The control interface of the fake CollNet (fake_collnet.cc), built into
 * libnccl-net-fake-coll-v<N>.so next to the fake net plugin: it exports
 * ncclCollNetPlugin_v<N> for the module's FAKE_NET_VERSION and these C
 * functions, which a test finds with dlsym on the same library.
 *
 * The fake's collectives are real and in-process: the ranks of one
 * communicator are comms made from the same handles (rank 0's listen handle
 * names the group); the k-th collective of each rank belongs to round k,
 * which completes when every rank has posted it. AllReduce and
 * ReduceScatter reduce int32 (ncclInt32 = 2) or float (ncclFloat32 = 7) with
 * sum (ncclSum = 0) or max (ncclMax = 2); AllGather concatenates.
 */
#ifndef RESILIENT_TESTS_FAKE_COLLNET_H
#define RESILIENT_TESTS_FAKE_COLLNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int version; /* N of the exported ncclCollNetPlugin_vN */
  int initCalls;
  int finalizeCalls;
  int devicesCalls;
  int listenCalls;
  int connectCalls;
  int reduceSupportCalls;
  int regMrCalls;
  int regMrDmaBufCalls;
  int deregMrCalls;
  int iallreduceCalls;
  int iallgatherCalls;
  int ireducescatterCalls;
  int iflushCalls;
  int testCalls;
  int closeCollCalls;
  int closeListenCalls;
  int makeVDeviceCalls;
  int liveContexts;
  int liveComms;    /* listen and coll comms not closed */
  int liveRequests; /* not yet reported done */
  int liveMhandles;
  uint64_t lastCommId;
  int lastNranks;
  int lastRank;
  /* The last collective's arguments, as the fake received them. */
  size_t lastCount;
  int lastDataType;
  int lastRedOp;
  void* lastSendMh;
  void* lastRecvMh;
  void* lastRegMh; /* what the last regMr / regMrDmaBuf returned */
  int lastNParts;
  size_t lastPartSize;
  void* lastPartMh;
  size_t lastBytesPerRank;
  size_t lastWindowOffset;
  size_t lastWindowBytes;
  int lastFlushSize;
  int lastDmaBufFd;
  uint64_t lastDmaBufOffset;
  int lastVDeviceNdevs;
} FakeCollNetStats;

typedef void (*FakeCollNetStatsFn)(FakeCollNetStats* out);
typedef void (*FakeCollNetResetFn)(void);
typedef void (*FakeCollNetFailNextFn)(const char* call, int result);
typedef int (*FakeCollNetSetFn)(const char* knob, long value);

void fakeCollNetStats(FakeCollNetStats* out);
/* Zeroes counters, failures and knobs; groups and live objects are forgotten. */
void fakeCollNetReset(void);
/* The next call of `call` ("init", "iallreduce", "test", ...) returns
 * `result` without doing anything else. */
void fakeCollNetFailNext(const char* call, int result);
/* Knobs; 0, or -1 for an unknown knob:
 *  "dmaBuf": 1 = the table has regMrDmaBuf and ptrSupport has NCCL_PTR_DMABUF
 *            (set before init: the table is filled in init);
 *  "stall":  1 = test() never reports a collective done;
 *  "devices": the device count (default 1). */
int fakeCollNetSet(const char* knob, long value);

#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_TESTS_FAKE_COLLNET_H */
