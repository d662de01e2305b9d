/*
 * nccl-resilient: NCCL's profiler-plugin ABI version 5 (NCCL 2.28.3+; the
 * newest version 2.28.9 looks for, exported as symbol ncclProfiler_v5).
 * Declares the event descriptor ncclProfilerEventDescr_v5_t (112 bytes),
 * the state-args union ncclProfilerEventStateArgs_v5_t (8 bytes) and the
 * plugin struct ncclProfiler_v5_t (6 pointers, 48 bytes). Fact sheet §2.1,
 * §2.2, §2.4, §2.5, §2.6, §2.9. Our own declaration, written from the fact
 * sheet's tables; do not mix with NCCL's profiler headers.
 *
 * The union members (coll, p2p, ...) have named struct types declared
 * first, because C++ forbids (clang: -Wnested-anon-types) unnamed struct
 * types inside an anonymous union. Access is unchanged: d->coll.seqNumber.
 */
#ifndef RESILIENT_NCCL_PROFILER_V5_H
#define RESILIENT_NCCL_PROFILER_V5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/profiler_common.h"
#include "nccl/result.h"

/* --- event descriptor members (type bit in the comment) ----------------- */

/* ncclProfileGroupApi: user thread; started when the first coll/p2p is
 * appended in the outermost group, stopped at the end of ncclGroupEnd. */
typedef struct {
  bool graphCaptured;
  int groupDepth; /* 1 = NCCL's implicit group, >1 = user group */
} ncclProfilerEventDescr_v5_groupApi_t;

/* ncclProfileCollApi: user thread, during ncclAllReduce(...) etc.;
 * stopped when the API call returns. */
typedef struct {
  const char* func; /* NCCL-owned static string */
  size_t count;
  const char* datatype; /* NCCL-owned static string */
  int root;
  void* stream; /* cudaStream_t */
  bool graphCaptured;
} ncclProfilerEventDescr_v5_collApi_t;

/* ncclProfileP2pApi: user thread, during ncclSend/ncclRecv. */
typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream; /* cudaStream_t */
  bool graphCaptured;
} ncclProfilerEventDescr_v5_p2pApi_t;

/* ncclProfileKernelLaunch: the launching thread (user thread, or a group
 * job thread for non-blocking communicators); stopped right after launch. */
typedef struct {
  void* stream; /* cudaStream_t */
} ncclProfilerEventDescr_v5_kernelLaunch_t;

/* ncclProfileColl: user thread or a CUDA host-callback thread. Stopped once
 * the proxy ops are posted ("enqueued", not "completed"); children start
 * later, so the plugin must reference-count it. */
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
  const char* algo;  /* NCCL-owned static string */
  const char* proto; /* NCCL-owned static string */
  void* parentGroup; /* handle our startEvent returned for the legacy Group */
} ncclProfilerEventDescr_v5_coll_t;

/* ncclProfileP2p: same threads and stop rule as Coll. */
typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup; /* handle our startEvent returned for the legacy Group */
} ncclProfilerEventDescr_v5_p2p_t;

/* ncclProfileProxyOp: proxy progress thread, one per channel and peer.
 * pid != our pid means a PXN op of another process: then parentObj is not
 * ours and must not be dereferenced. */
typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps; /* whole network transfers (divided by sliceSteps) */
  int chunkSize;
  int isSend;
} ncclProfilerEventDescr_v5_proxyOp_t;

/* ncclProfileProxyStep: progress thread; parent is the ProxyOp. */
typedef struct {
  int step; /* whole network transfers (divided by sliceSteps) */
} ncclProfilerEventDescr_v5_proxyStep_t;

/* ncclProfileKernelCh: progress thread, started when the kernel marked the
 * op started on this channel, stopped (after state KernelChStop) when it
 * marked it completed. Parent is the Coll/P2p. */
typedef struct {
  uint8_t channelId;
  uint64_t pTimer; /* GPU %globaltimer at start, ns */
} ncclProfilerEventDescr_v5_kernelCh_t;

/* ncclProfileNetPlugin: progress thread, inside the net plugin's
 * isend/irecv/test (docs/reference/nccl-abi.md §1.10). Parent is the ProxyStep. */
typedef struct {
  int64_t id; /* pluginId: low 16 bits version, next 16 bits type */
  void* data; /* the net plugin's extData, layout defined by it */
} ncclProfilerEventDescr_v5_netPlugin_t;

/* --- event descriptor ----------------------------------------------------- */

typedef struct {
  uint64_t type;   /* one ncclProfile* bit; 8 bytes since v5 */
  void* parentObj; /* the handle our startEvent returned for the parent
                      event; NULL if the parent was not started or we
                      returned NULL */
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
  };
} ncclProfilerEventDescr_v5_t;

NCCL_ABI_SIZE(ncclProfilerEventDescr_v5_t, 112);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, parentObj, 8);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, rank, 16);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, groupApi.graphCaptured, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, groupApi.groupDepth, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.func, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.count, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.datatype, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.root, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.stream, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, collApi.graphCaptured, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2pApi.func, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2pApi.count, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2pApi.datatype, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2pApi.stream, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2pApi.graphCaptured, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, kernelLaunch.stream, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.seqNumber, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.func, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.sendBuff, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.recvBuff, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.count, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.root, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.datatype, 72);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.nChannels, 80);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.nWarps, 81);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.algo, 88);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.proto, 96);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, coll.parentGroup, 104);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.func, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.buff, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.datatype, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.count, 48);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.peer, 56);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.nChannels, 60);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, p2p.parentGroup, 64);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.pid, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.channelId, 28);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.peer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.nSteps, 36);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.chunkSize, 40);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyOp.isSend, 44);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, proxyStep.step, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, kernelCh.channelId, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, kernelCh.pTimer, 32);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, netPlugin.id, 24);
NCCL_ABI_OFFSET(ncclProfilerEventDescr_v5_t, netPlugin.data, 32);

/* --- state arguments (recordEventState); the pointer may be NULL ---------- */

typedef struct {
  size_t transSize;
} ncclProfilerEventStateArgs_v5_proxyStep_t;

typedef struct {
  int appendedProxyOps;
} ncclProfilerEventStateArgs_v5_proxyCtrl_t;

typedef struct {
  void* data; /* with ncclProfilerNetPluginUpdate: the net plugin's extData */
} ncclProfilerEventStateArgs_v5_netPlugin_t;

typedef struct {
  uint64_t pTimer; /* with ncclProfilerKernelChStop: GPU stop time, ns */
} ncclProfilerEventStateArgs_v5_kernelCh_t;

typedef union {
  ncclProfilerEventStateArgs_v5_proxyStep_t proxyStep;
  ncclProfilerEventStateArgs_v5_proxyCtrl_t proxyCtrl;
  ncclProfilerEventStateArgs_v5_netPlugin_t netPlugin;
  ncclProfilerEventStateArgs_v5_kernelCh_t kernelCh;
} ncclProfilerEventStateArgs_v5_t;

NCCL_ABI_SIZE(ncclProfilerEventStateArgs_v5_t, 8);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v5_t, proxyStep.transSize, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v5_t, proxyCtrl.appendedProxyOps, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v5_t, netPlugin.data, 0);
NCCL_ABI_OFFSET(ncclProfilerEventStateArgs_v5_t, kernelCh.pTimer, 0);

/* --- plugin struct, exported as `ncclProfiler_v5` --------------------------
 * Process-global; init/finalize run once per communicator. Calls arrive
 * concurrently from user threads, CUDA host-callback threads, the proxy
 * progress thread and group job threads; a child may start on another
 * thread than its parent, and after the parent stopped. Never block.
 * NCCL ignores the return values of startEvent, stopEvent and
 * recordEventState: return ncclSuccess. */
typedef struct {
  const char* name;
  /* Per communicator. commId = comm->commHash (same on all ranks, same as
   * the net plugin's commId); commName may be NULL; eActivationMask points
   * at the one process-wide mask (last writer wins). On error NCCL only
   * logs "Continue without profiler" and keeps the plugin loaded; events
   * can then still arrive with context NULL. */
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  /* context may be NULL (init failed). Store our handle, or NULL, in
   * *eHandle; it becomes the parentObj of this event's children. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  /* eHandle may be NULL. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* eHandle may be NULL; eStateArgs may be NULL (GroupApi states). */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  /* Per communicator, in commFree (be prepared for a NULL context). */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

NCCL_ABI_SIZE(ncclProfiler_v5_t, 48);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, name, 0);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, init, 8);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, startEvent, 16);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, stopEvent, 24);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, recordEventState, 32);
NCCL_ABI_OFFSET(ncclProfiler_v5_t, finalize, 40);

#endif /* RESILIENT_NCCL_PROFILER_V5_H */
