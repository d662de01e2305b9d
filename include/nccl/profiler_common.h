/*
 * nccl-resilient: the parts of NCCL's profiler-plugin ABI that every
 * profiler version shares (docs/reference/nccl-abi.md §2.3, §2.7): the event type bits used
 * in descriptors and in the activation mask, and the 4-byte event-state
 * enum passed to recordEventState. Our own declaration, written from the
 * docs/reference/nccl-abi.md; do not mix with NCCL's profiler headers in one translation unit.
 */
#ifndef RESILIENT_NCCL_PROFILER_COMMON_H
#define RESILIENT_NCCL_PROFILER_COMMON_H

#include <sys/types.h>

#include "nccl/abi_check.h"

/*
 * Event type bits. A descriptor's `type` holds exactly one of them; the
 * activation mask (one process-wide int, shared by every communicator, last
 * writer wins) is an OR of them. NCCL samples the mask per operation at
 * enqueue time (ProxyCtrl reads it live). Enabling a child event implicitly
 * enables the parents that carry the hierarchy. All twelve v5 bits = 4095.
 * Bits 12..14 (copy-engine events) belong to v6 (NCCL 2.29+), bit 15
 * (kernel phases) to v7 (NCCL 2.31+; docs/reference/nccl-2.31-plugins.md
 * §1.4): they are not part of the 2.28 ABI described in docs/reference/nccl-abi.md.
 */
enum {
  ncclProfileGroup = (1 << 0),         /* since v1: legacy group; parentObj NULL */
  ncclProfileColl = (1 << 1),          /* since v1: collective, stopped when enqueued */
  ncclProfileP2p = (1 << 2),           /* since v1: point-to-point, stopped when enqueued */
  ncclProfileProxyOp = (1 << 3),       /* since v1: progress thread, per channel and peer */
  ncclProfileProxyStep = (1 << 4),     /* since v1: progress thread, one network transfer */
  ncclProfileProxyCtrl = (1 << 5),     /* since v1: progress thread state; parentObj NULL */
  ncclProfileKernelCh = (1 << 6),      /* since v3: progress thread, GPU channel start/stop */
  ncclProfileNetPlugin = (1 << 7),     /* since v3: emitted by the net plugin via NCCL */
  ncclProfileGroupApi = (1 << 8),      /* since v5: user thread, outermost group */
  ncclProfileCollApi = (1 << 9),       /* since v5: user thread, during the API call */
  ncclProfileP2pApi = (1 << 10),       /* since v5: user thread, during the API call */
  ncclProfileKernelLaunch = (1 << 11), /* since v5: thread that launches the kernels */
  ncclProfileCeColl = (1 << 12),       /* since v6: a collective run by the copy engines */
  ncclProfileCeSync = (1 << 13),       /* since v6: a synchronization of a CE collective */
  ncclProfileCeBatch = (1 << 14),      /* since v6: a batch of CE copies */
  ncclProfileKernelPhase = (1 << 15)   /* since v7: a phase of a kernel channel; parent KernelCh */
};

/*
 * Event states, one 4-byte enum shared by all profiler versions. Values
 * 0..7 (ProxyOp states) are deprecated since v4. ProxyStep send order:
 * SendGPUWait, SendPeerWait_v4 (data ready), SendWait (isend posted), stop
 * (test done). Recv order: RecvWait (irecv posted), RecvFlushWait (test
 * done), RecvGPUWait (flush done), stop (GPU consumed).
 */
typedef enum {
  ncclProfilerProxyOpSendPosted = 0,       /* deprecated since v4 */
  ncclProfilerProxyOpSendRemFifoWait = 1,  /* deprecated since v4 */
  ncclProfilerProxyOpSendTransmitted = 2,  /* deprecated since v4 */
  ncclProfilerProxyOpSendDone = 3,         /* deprecated since v4 */
  ncclProfilerProxyOpRecvPosted = 4,       /* deprecated since v4 */
  ncclProfilerProxyOpRecvReceived = 5,     /* deprecated since v4 */
  ncclProfilerProxyOpRecvTransmitted = 6,  /* deprecated since v4 */
  ncclProfilerProxyOpRecvDone = 7,         /* deprecated since v4 */
  ncclProfilerProxyStepSendGPUWait = 8,    /* waiting for the local GPU to produce data */
  ncclProfilerProxyStepSendWait = 9,       /* isend posted, waiting for the network */
  ncclProfilerProxyStepRecvWait = 10,      /* irecv posted, waiting for the network */
  ncclProfilerProxyStepRecvFlushWait = 11, /* received, waiting for the flush */
  ncclProfilerProxyStepRecvGPUWait = 12,   /* flushed, waiting for the GPU to consume */
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerProxyOpInProgress_v4 = 19,     /* since v4 */
  ncclProfilerProxyStepSendPeerWait_v4 = 20, /* since v4: data ready, waiting for the peer */
  ncclProfilerNetPluginUpdate = 21,          /* since v4: args netPlugin.data = plugin's extData */
  ncclProfilerKernelChStop = 22,             /* since v4: args kernelCh.pTimer = GPU stop ns */
  ncclProfilerGroupStartApiStop = 23,        /* since v5: GroupApi; args may be NULL */
  ncclProfilerGroupEndApiStart = 24,         /* since v5: GroupApi; args may be NULL */
  ncclProfilerCeCollStart = 25,              /* since v6: copy-engine collective states */
  ncclProfilerCeCollComplete = 26,           /* since v6 */
  ncclProfilerCeSyncStart = 27,              /* since v6 */
  ncclProfilerCeSyncComplete = 28,           /* since v6 */
  ncclProfilerCeBatchStart = 29,             /* since v6 */
  ncclProfilerCeBatchComplete = 30,          /* since v6 */
  ncclProfilerKernelPhaseStop = 31           /* since v7: args kernelCh.pTimer = GPU phase end ns */
} ncclProfilerEventState_t;

NCCL_ABI_SIZE(ncclProfilerEventState_t, 4);

/* Every profiler version uses the same state enum. */
typedef ncclProfilerEventState_t ncclProfilerEventState_v1_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v2_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v7_t;

/* proxyOp.pid in every descriptor version is a 4-byte pid_t. */
NCCL_ABI_SIZE(pid_t, 4);

#endif /* RESILIENT_NCCL_PROFILER_COMMON_H */
