/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 6 (NCCL 2.29+, symbol
 * ncclProfiler_v6, the first one 2.29 and 2.30 look up). Version 5 plus
 * three event types for collectives NCCL runs on the copy engines (CE:
 * cudaMemcpy-driven all-gather/all-to-all over NVLink, no proxy and no
 * kernel channels): ncclProfileCeColl (the collective), ncclProfileCeSync
 * (a synchronization between its ranks) and ncclProfileCeBatch (a batch of
 * its copies). Their descriptor members join the union without growing it
 * (still 112 bytes), so every v5 member keeps its offset; state arguments
 * and the table are v5's. CE events record no states: they start and stop.
 * Our own declaration, sizes and offsets checked by static_assert.
 */
#ifndef RESILIENT_NCCL_PROFILER_V6_H
#define RESILIENT_NCCL_PROFILER_V6_H

#include "nccl/profiler_v5.h"

/* ncclProfileCeColl: the calling thread, when the CE collective is enqueued. */
typedef struct {
  uint64_t seqNumber; /* per communicator and function, as coll.seqNumber */
  const char* func;   /* NCCL-owned static string */
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;     /* NCCL-owned static string */
  const char* syncStrategy; /* NCCL-owned static string */
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum; /* the CE collectives' own counter */
  void* stream;      /* cudaStream_t */
} ncclProfilerEventDescr_v6_ceColl_t;

/* ncclProfileCeSync: child of a CeColl. */
typedef struct {
  bool isComplete;
  int nRanks;
} ncclProfilerEventDescr_v6_ceCollSync_t;

/* ncclProfileCeBatch: child of a CeColl. */
typedef struct {
  int numOps;
  size_t totalBytes;
  bool useIntraSync;
} ncclProfilerEventDescr_v6_ceCollBatch_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    ncclProfilerEventDescr_v5_groupApi_t groupApi;
    ncclProfilerEventDescr_v5_collApi_t collApi;
    ncclProfilerEventDescr_v5_p2pApi_t p2pApi;
    ncclProfilerEventDescr_v5_kernelLaunch_t kernelLaunch;
    ncclProfilerEventDescr_v5_coll_t coll;
    ncclProfilerEventDescr_v5_p2p_t p2p;
    ncclProfilerEventDescr_v5_proxyOp_t proxyOp;
    ncclProfilerEventDescr_v5_proxyStep_t proxyStep;
    ncclProfilerEventDescr_v5_kernelCh_t kernelCh;
    ncclProfilerEventDescr_v5_netPlugin_t netPlugin;
    ncclProfilerEventDescr_v6_ceColl_t ceColl;
    ncclProfilerEventDescr_v6_ceCollSync_t ceCollSync;
    ncclProfilerEventDescr_v6_ceCollBatch_t ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v6_t, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, coll.seqNumber, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, coll.parentGroup, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, p2p.parentGroup, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, kernelCh.pTimer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, netPlugin.data, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.seqNumber, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.func, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.sendBuff, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.recvBuff, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.count, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.root, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.datatype, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.intraBatchSync, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.batchSize, 92);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.numBatches, 96);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.ceSeqNum, 100);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceColl.stream, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceCollSync.isComplete, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceCollSync.nRanks, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceCollBatch.numOps, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceCollBatch.totalBytes, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v6_t, ceCollBatch.useIntraSync, 40);

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

/* The table of v5 (its comments hold) with the v6 descriptor. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

NCCL_ABI_SIZE(ncclProfiler_v6_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v6_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V6_H */
