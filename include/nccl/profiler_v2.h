/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 2 (NCCL 2.24+,
 * exported as symbol ncclProfiler_v2). Declares the event descriptor
 * ncclProfilerEventDescr_v2_t (128 bytes), the state-args union
 * ncclProfilerEventStateArgs_v2_t (16 bytes) and the plugin struct
 * ncclProfiler_v2_t (6 pointers, 48 bytes). Fact sheet §2.2, §2.4, §2.5,
 * §2.8. Our own declaration, written from docs/reference/nccl-abi.md's tables; do not
 * mix with NCCL's profiler headers.
 *
 * v2 replaced v1's numeric func/datatype/algo/proto with strings and
 * dropped op, isCollnet and isNvls. It has no KernelCh or NetPlugin events;
 * coll still has trafficBytes. init only gets the mask pointer.
 * Union members have named struct types (see profiler_v5.h for why).
 */
#ifndef RESILIENT_NCCL_PROFILER_V2_H
#define RESILIENT_NCCL_PROFILER_V2_H

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
  size_t trafficBytes;
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;  /* NCCL-owned static string */
  const char* proto; /* NCCL-owned static string */
} ncclProfilerEventDescr_v2_coll_t;

/* ncclProfileP2p */
typedef struct {
  const char* name;
  uint64_t commHash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
} ncclProfilerEventDescr_v2_p2p_t;

/* ncclProfileProxyOp: pid != our pid means a PXN op of another process
 * whose parentObj must not be dereferenced. */
typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
} ncclProfilerEventDescr_v2_proxyOp_t;

/* ncclProfileProxyStep */
typedef struct {
  int step;
} ncclProfilerEventDescr_v2_proxyStep_t;

/* --- event descriptor ----------------------------------------------------- */

typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* the handle our startEvent returned for the parent
                      event, or NULL */
  int rank;
  union {
    ncclProfilerEventDescr_v2_coll_t coll;
    ncclProfilerEventDescr_v2_p2p_t p2p;
    ncclProfilerEventDescr_v2_proxyOp_t proxyOp;
    ncclProfilerEventDescr_v2_proxyStep_t proxyStep;
  };
} ncclProfilerEventDescr_v2_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v2_t, 128);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.name, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.commHash, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.seqNumber, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.func, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.sendBuff, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.recvBuff, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.count, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.root, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.datatype, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.trafficBytes, 96);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.nMaxChannels, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.nWarps, 105);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.algo, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, coll.proto, 120);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.name, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.commHash, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.func, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.buff, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.datatype, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.count, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, p2p.peer, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.pid, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.channelId, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.peer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.nSteps, 36);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.chunkSize, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyOp.isSend, 44);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v2_t, proxyStep.step, 24);

/* --- state arguments (recordEventState); the pointer may be NULL ---------- */

typedef struct {
  size_t transSize;
  int steps;
} ncclProfilerEventStateArgs_v2_proxyOp_t;

typedef struct {
  int appendedProxyOps;
} ncclProfilerEventStateArgs_v2_proxyCtrl_t;

typedef union {
  ncclProfilerEventStateArgs_v2_proxyOp_t proxyOp;
  ncclProfilerEventStateArgs_v2_proxyCtrl_t proxyCtrl;
} ncclProfilerEventStateArgs_v2_t;

NCCL_ABI_SIZE(ncclProfilerEventStateArgs_v2_t, 16);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v2_t, proxyOp.transSize, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v2_t, proxyOp.steps, 8);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v2_t, proxyCtrl.appendedProxyOps, 0);

/* --- plugin struct, exported as `ncclProfiler_v2` --------------------------
 * Same contract as v5 (see profiler_v5.h): process-global, concurrent
 * callers, never block, NULL handles/args tolerated, return ncclSuccess
 * from everything but init. */
typedef struct {
  const char* name;
  /* Per communicator; only the pointer to the process-wide mask. */
  ncclResult_t (*init)(void** context, int* eActivationMask);
  /* context may be NULL; store our handle (or NULL) in *eHandle: it becomes
   * the parentObj of this event's children. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v2_t* eDescr);
  /* eHandle may be NULL. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* eHandle and eStateArgs may be NULL. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v2_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v2_t;

NCCL_ABI_SIZE(ncclProfiler_v2_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v2_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V2_H */
