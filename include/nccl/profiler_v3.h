/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 3 (NCCL 2.26.2+,
 * exported as symbol ncclProfiler_v3). Declares the event descriptor
 * ncclProfilerEventDescr_v3_t (120 bytes), the state-args union
 * ncclProfilerEventStateArgs_v3_t (16 bytes) and the plugin struct
 * ncclProfiler_v3_t (6 pointers, 48 bytes). Fact sheet §2.2, §2.4, §2.5,
 * §2.8. Our own declaration, written from docs/reference/nccl-abi.md's tables; do not
 * mix with NCCL's profiler headers.
 *
 * v3 added the KernelCh and NetPlugin events and dropped coll.trafficBytes.
 * coll/p2p still carry name and commHash; init only gets the mask pointer.
 * Union members have named struct types (see profiler_v5.h for why).
 */
#ifndef RESILIENT_NCCL_PROFILER_V3_H
#define RESILIENT_NCCL_PROFILER_V3_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl/abi_check.h"
#include "nccl/profiler_common.h"
#include "nccl/result.h"

/* --- event descriptor members ------------------------------------------- */

/* ncclProfileColl */
typedef struct {
  const char* name;
  uint64_t commHash;
  uint64_t seqNumber;
  const char* func; /* NCCL-owned static string */
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype; /* NCCL-owned static string */
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;  /* NCCL-owned static string */
  const char* proto; /* NCCL-owned static string */
} ncclProfilerEventDescr_v3_coll_t;

/* ncclProfileP2p */
typedef struct {
  const char* name;
  uint64_t commHash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
} ncclProfilerEventDescr_v3_p2p_t;

/* ncclProfileProxyOp: pid != our pid means a PXN op of another process
 * whose parentObj must not be dereferenced. */
typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
} ncclProfilerEventDescr_v3_proxyOp_t;

/* ncclProfileProxyStep */
typedef struct {
  int step;
} ncclProfilerEventDescr_v3_proxyStep_t;

/* ncclProfileKernelCh (new in v3; no timer before v4) */
typedef struct {
  uint8_t channelId;
} ncclProfilerEventDescr_v3_kernelCh_t;

/* ncclProfileNetPlugin (new in v3): emitted from inside the net plugin. */
typedef struct {
  int64_t id; /* pluginId: low 16 bits version, next 16 bits type */
  void* data; /* the net plugin's extData */
} ncclProfilerEventDescr_v3_netPlugin_t;

/* --- event descriptor ----------------------------------------------------- */

typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* the handle our startEvent returned for the parent
                      event, or NULL */
  int rank;
  union {
    ncclProfilerEventDescr_v3_coll_t coll;
    ncclProfilerEventDescr_v3_p2p_t p2p;
    ncclProfilerEventDescr_v3_proxyOp_t proxyOp;
    ncclProfilerEventDescr_v3_proxyStep_t proxyStep;
    ncclProfilerEventDescr_v3_kernelCh_t kernelCh;
    ncclProfilerEventDescr_v3_netPlugin_t netPlugin;
  };
} ncclProfilerEventDescr_v3_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v3_t, 120);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.name, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.commHash, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.seqNumber, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.func, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.sendBuff, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.recvBuff, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.count, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.root, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.datatype, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.nMaxChannels, 96);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.nWarps, 97);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.algo, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, coll.proto, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.name, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.commHash, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.func, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.buff, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.datatype, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.count, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, p2p.peer, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.pid, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.channelId, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.peer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.nSteps, 36);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.chunkSize, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyOp.isSend, 44);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, proxyStep.step, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, kernelCh.channelId, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, netPlugin.id, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v3_t, netPlugin.data, 32);

/* --- state arguments (recordEventState); the pointer may be NULL ---------- */

typedef struct {
  size_t transSize;
  int steps;
} ncclProfilerEventStateArgs_v3_proxyOp_t;

typedef struct {
  int appendedProxyOps;
} ncclProfilerEventStateArgs_v3_proxyCtrl_t;

typedef union {
  ncclProfilerEventStateArgs_v3_proxyOp_t proxyOp;
  ncclProfilerEventStateArgs_v3_proxyCtrl_t proxyCtrl;
} ncclProfilerEventStateArgs_v3_t;

NCCL_ABI_SIZE(ncclProfilerEventStateArgs_v3_t, 16);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v3_t, proxyOp.transSize, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v3_t, proxyOp.steps, 8);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v3_t, proxyCtrl.appendedProxyOps, 0);

/* --- plugin struct, exported as `ncclProfiler_v3` --------------------------
 * Same contract as v5 (see profiler_v5.h): process-global, concurrent
 * callers, never block, NULL handles/args tolerated, return ncclSuccess
 * from everything but init. */
typedef struct {
  const char* name;
  /* Per communicator; only the pointer to the process-wide mask. */
  ncclResult_t (*init)(void** context, int* eActivationMask);
  /* context may be NULL; store our handle (or NULL) in *eHandle: it becomes
   * the parentObj of this event's children. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v3_t* eDescr);
  /* eHandle may be NULL. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* eHandle and eStateArgs may be NULL. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v3_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v3_t;

NCCL_ABI_SIZE(ncclProfiler_v3_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v3_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V3_H */
