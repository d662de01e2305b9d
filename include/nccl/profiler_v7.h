/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 7 (NCCL 2.31+, symbol
 * ncclProfiler_v7, the first one 2.31 looks up; then v6 ... v1).
 * docs/reference/nccl-2.31-plugins.md §1.1-§1.9. Version 6 plus:
 *  - one event type, ncclProfileKernelPhase (bit 15): a phase of a kernel
 *    channel (0 initial_sync, 1 compute, 2 final_sync), child of the
 *    KernelCh event, started with the phase's GPU start time and ended by
 *    the state ncclProfilerKernelPhaseStop (31), whose GPU end time comes in
 *    the state arguments' kernelCh.pTimer;
 *  - a 64-bit user tag (ncclCollConfig_t.userProfilerTag of the call; 0
 *    untagged) appended to the collApi, p2pApi, coll, p2p and ceColl members;
 *  - coll gains kernelVariant (symmetric kernels' name, else NULL) and
 *    isSymColl, before its userTag.
 * Every new member is appended, so each v6 member is a prefix of its v7 one
 * (checked below); the union grows from 112 to 136 bytes (coll). The state
 * arguments and the table have v6's shape. Our own declaration, sizes and
 * offsets checked by static_assert.
 */
#ifndef RESILIENT_NCCL_PROFILER_V7_H
#define RESILIENT_NCCL_PROFILER_V7_H

#include "nccl/profiler_v6.h"

/* ncclProfileCollApi: v5's members, then the call's user tag. */
typedef struct {
  const char* func; /* NCCL-owned static string */
  size_t count;
  const char* datatype; /* NCCL-owned static string */
  int root;
  void* stream; /* cudaStream_t */
  bool graphCaptured;
  uint64_t userTag; /* 0: untagged; values with the top bit set are NCCL's */
} ncclProfilerEventDescr_v7_collApi_t;

/* ncclProfileP2pApi: v5's members, then the call's user tag. */
typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream; /* cudaStream_t */
  bool graphCaptured;
  uint64_t userTag;
} ncclProfilerEventDescr_v7_p2pApi_t;

/* ncclProfileColl: v5's members, then the kernel's identity and the user tag. */
typedef struct {
  uint64_t seqNumber; /* per-communicator, per-function counter (as RAS) */
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels; /* complete when this many KernelCh events stopped */
  uint8_t nWarps;
  const char* algo;          /* NCCL-owned static string */
  const char* proto;         /* NCCL-owned static string ("" for symmetric kernels) */
  void* parentGroup;         /* handle our startEvent returned for the legacy Group */
  const char* kernelVariant; /* symmetric kernels: the kernel's name; else NULL */
  bool isSymColl;            /* run by a symmetric kernel (its opening barrier syncs all ranks) */
  uint64_t userTag;
} ncclProfilerEventDescr_v7_coll_t;

/* ncclProfileP2p: v5's members, then the user tag. */
typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
  uint64_t userTag;
} ncclProfilerEventDescr_v7_p2p_t;

/* ncclProfileCeColl: v6's members, then the user tag. */
typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
  uint64_t userTag;
} ncclProfilerEventDescr_v7_ceColl_t;

/* ncclProfileKernelPhase: NCCL's profiler thread, once the kernel finished
 * the channel's work and before the KernelCh event stops (start, the Stop
 * state, stop, one phase after the other). Parent is the KernelCh event. */
typedef struct {
  uint8_t channelId;
  uint8_t phaseId;       /* 0 initial_sync, 1 compute, 2 final_sync */
  const char* phaseName; /* NCCL-owned static string: "initial_sync", ... */
  uint64_t pTimer;       /* GPU %globaltimer at the phase's start, ns */
} ncclProfilerEventDescr_v7_kernelPhase_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    ncclProfilerEventDescr_v5_groupApi_t groupApi;
    ncclProfilerEventDescr_v7_collApi_t collApi;
    ncclProfilerEventDescr_v7_p2pApi_t p2pApi;
    ncclProfilerEventDescr_v5_kernelLaunch_t kernelLaunch;
    ncclProfilerEventDescr_v7_coll_t coll;
    ncclProfilerEventDescr_v7_p2p_t p2p;
    ncclProfilerEventDescr_v5_proxyOp_t proxyOp;
    ncclProfilerEventDescr_v5_proxyStep_t proxyStep;
    ncclProfilerEventDescr_v5_kernelCh_t kernelCh;
    ncclProfilerEventDescr_v5_netPlugin_t netPlugin;
    ncclProfilerEventDescr_v7_ceColl_t ceColl;
    ncclProfilerEventDescr_v6_ceCollSync_t ceCollSync;
    ncclProfilerEventDescr_v6_ceCollBatch_t ceCollBatch;
    ncclProfilerEventDescr_v7_kernelPhase_t kernelPhase;
  };
} ncclProfilerEventDescr_v7_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v7_t, 136);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, collApi.graphCaptured, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, collApi.userTag, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, p2pApi.graphCaptured, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, p2pApi.userTag, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.seqNumber, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.nChannels, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.algo, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.parentGroup, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.kernelVariant, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.isSymColl, 120);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, coll.userTag, 128);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, p2p.peer, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, p2p.parentGroup, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, p2p.userTag, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, proxyOp.channelId, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, kernelCh.pTimer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, netPlugin.data, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, ceColl.stream, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, ceColl.userTag, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, ceCollBatch.useIntraSync, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, kernelPhase.channelId, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, kernelPhase.phaseId, 25);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, kernelPhase.phaseName, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v7_t, kernelPhase.pTimer, 40);

/* Each v6 member is a prefix of its v7 member: the v7 one ends with what it
 * appends. */
NCCL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v7_t, collApi.graphCaptured) ==
                    offsetof(ncclProfilerEventDescr_v6_t, collApi.graphCaptured),
                "the v6 member collApi must be a prefix of the v7 one");
NCCL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v7_t, p2pApi.graphCaptured) ==
                    offsetof(ncclProfilerEventDescr_v6_t, p2pApi.graphCaptured),
                "the v6 member p2pApi must be a prefix of the v7 one");
NCCL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v7_t, coll.parentGroup) ==
                    offsetof(ncclProfilerEventDescr_v6_t, coll.parentGroup),
                "the v6 member coll must be a prefix of the v7 one");
NCCL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v7_t, p2p.parentGroup) ==
                    offsetof(ncclProfilerEventDescr_v6_t, p2p.parentGroup),
                "the v6 member p2p must be a prefix of the v7 one");
NCCL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v7_t, ceColl.stream) ==
                    offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream),
                "the v6 member ceColl must be a prefix of the v7 one");

/* v6's state arguments: a KernelPhaseStop carries the phase's GPU end time
 * in kernelCh.pTimer, as KernelChStop carries the channel's. */
typedef ncclProfilerEventStateArgs_v6_t ncclProfilerEventStateArgs_v7_t;

/* The table of v5 (its comments hold) with the v7 descriptor. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v7_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v7_t eState,
                                   ncclProfilerEventStateArgs_v7_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v7_t;

NCCL_ABI_SIZE(ncclProfiler_v7_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v7_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V7_H */
