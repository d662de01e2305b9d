/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 4 (NCCL 2.27.3+,
 * exported as symbol ncclProfiler_v4). Declares the event descriptor
 * ncclProfilerEventDescr_v4_t (104 bytes), the state-args union
 * ncclProfilerEventStateArgs_v4_t (8 bytes) and the plugin struct
 * ncclProfiler_v4_t (6 pointers, 48 bytes). Fact sheet §2.2, §2.4, §2.5,
 * §2.8. Our own declaration, written from docs/reference/nccl-abi.md's tables; do not
 * mix with NCCL's profiler headers.
 *
 * Differences from v5: `type` is a uint8_t, there are no API or
 * kernel-launch events, coll/p2p have no parentGroup (their parent is the
 * legacy Group), and init takes commHash as its 4th argument.
 * Union members have named struct types (see profiler_v5.h for why).
 */
#ifndef RESILIENT_NCCL_PROFILER_V4_H
#define RESILIENT_NCCL_PROFILER_V4_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/profiler_common.h"
#include "nccl/result.h"

/* --- event descriptor members ------------------------------------------- */

/* ncclProfileColl: stopped once enqueued, not completed. */
typedef struct {
  uint64_t seqNumber; /* per-communicator, per-function counter */
  const char* func;   /* NCCL-owned static string */
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype; /* NCCL-owned static string */
  uint8_t nChannels;    /* the real channel count since v4 */
  uint8_t nWarps;
  const char* algo;  /* NCCL-owned static string */
  const char* proto; /* NCCL-owned static string */
} ncclProfilerEventDescr_v4_coll_t;

/* ncclProfileP2p: stopped once enqueued, not completed. */
typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels; /* new in v4 */
} ncclProfilerEventDescr_v4_p2p_t;

/* ncclProfileProxyOp: progress thread; pid != our pid means a PXN op of
 * another process whose parentObj must not be dereferenced. */
typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
} ncclProfilerEventDescr_v4_proxyOp_t;

/* ncclProfileProxyStep: progress thread; parent is the ProxyOp. */
typedef struct {
  int step;
} ncclProfilerEventDescr_v4_proxyStep_t;

/* ncclProfileKernelCh: progress thread; parent is the Coll/P2p. */
typedef struct {
  uint8_t channelId;
  uint64_t pTimer; /* GPU start time, ns (new in v4) */
} ncclProfilerEventDescr_v4_kernelCh_t;

/* ncclProfileNetPlugin: emitted from inside the net plugin (§1.10). */
typedef struct {
  int64_t id; /* pluginId: low 16 bits version, next 16 bits type */
  void* data; /* the net plugin's extData */
} ncclProfilerEventDescr_v4_netPlugin_t;

/* --- event descriptor ----------------------------------------------------- */

typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* the handle our startEvent returned for the parent
                      event, or NULL */
  int rank;
  union {
    ncclProfilerEventDescr_v4_coll_t coll;
    ncclProfilerEventDescr_v4_p2p_t p2p;
    ncclProfilerEventDescr_v4_proxyOp_t proxyOp;
    ncclProfilerEventDescr_v4_proxyStep_t proxyStep;
    ncclProfilerEventDescr_v4_kernelCh_t kernelCh;
    ncclProfilerEventDescr_v4_netPlugin_t netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v4_t, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.seqNumber, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.func, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.sendBuff, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.recvBuff, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.count, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.root, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.datatype, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.nChannels, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.nWarps, 81);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.algo, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, coll.proto, 96);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.func, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.buff, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.datatype, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.count, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.peer, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, p2p.nChannels, 60);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.pid, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.channelId, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.peer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.nSteps, 36);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.chunkSize, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyOp.isSend, 44);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, proxyStep.step, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, kernelCh.channelId, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, kernelCh.pTimer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, netPlugin.id, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v4_t, netPlugin.data, 32);

/* --- state arguments (recordEventState); the pointer may be NULL ---------- */

typedef struct {
  size_t transSize;
} ncclProfilerEventStateArgs_v4_proxyStep_t;

typedef struct {
  int appendedProxyOps;
} ncclProfilerEventStateArgs_v4_proxyCtrl_t;

typedef struct {
  void* data; /* with ncclProfilerNetPluginUpdate: the net plugin's extData */
} ncclProfilerEventStateArgs_v4_netPlugin_t;

typedef struct {
  uint64_t pTimer; /* with ncclProfilerKernelChStop: GPU stop time, ns */
} ncclProfilerEventStateArgs_v4_kernelCh_t;

typedef union {
  ncclProfilerEventStateArgs_v4_proxyStep_t proxyStep;
  ncclProfilerEventStateArgs_v4_proxyCtrl_t proxyCtrl;
  ncclProfilerEventStateArgs_v4_netPlugin_t netPlugin;
  ncclProfilerEventStateArgs_v4_kernelCh_t kernelCh;
} ncclProfilerEventStateArgs_v4_t;

NCCL_ABI_SIZE(ncclProfilerEventStateArgs_v4_t, 8);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v4_t, proxyStep.transSize, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v4_t, proxyCtrl.appendedProxyOps, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v4_t, netPlugin.data, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v4_t, kernelCh.pTimer, 0);

/* --- plugin struct, exported as `ncclProfiler_v4` --------------------------
 * Same contract as v5 (see profiler_v5.h): process-global, concurrent
 * callers, never block, NULL handles/args tolerated, return ncclSuccess
 * from everything but init. */
typedef struct {
  const char* name;
  /* Per communicator. Note the order: commHash is the 4th argument. */
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName,
                       uint64_t commHash, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  /* context may be NULL; store our handle (or NULL) in *eHandle: it becomes
   * the parentObj of this event's children. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  /* eHandle may be NULL. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* eHandle and eStateArgs may be NULL. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

NCCL_ABI_SIZE(ncclProfiler_v4_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v4_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V4_H */
