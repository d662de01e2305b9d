/*
 * nccl-resilient: profiler events emitted by a net plugin (docs/reference/nccl-abi.md
 * §1.10): the pluginId encoding passed to ncclProfilerCallback_t, and, for
 * reference, the v1 event descriptors of NCCL's built-in IB and Socket
 * transports. The descriptor behind extData is defined by the emitting
 * plugin and read by the profiler; both of ours agree on it.
 */
#ifndef RESILIENT_NCCL_NET_PROFILER_H
#define RESILIENT_NCCL_NET_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"

/* pluginId: low 16 bits = version of the descriptor struct, next 16 bits =
 * descriptor type. */
#define NCCL_PROFILER_NET_VER_MASK 0xFFFF
#define NCCL_PROFILER_NET_TYPE_MASK 0xFFFF0000
#define NCCL_PROFILER_NET_TYPE_IB 0x10000   /* NCCL's internal IB transport */
#define NCCL_PROFILER_NET_TYPE_SOCK 0x20000 /* NCCL's internal Socket transport */
/* Our own type (unused by NCCL): nccl-resilient's descriptors. */
#define NCCL_PROFILER_NET_TYPE_RESILIENT 0x30000

/* IB, version 1: pluginId = NCCL_PROFILER_NET_TYPE_IB | 1. */
typedef struct {
  uint8_t type; /* event kind within the IB descriptor space */
  struct {
    int device;     /* IB device index */
    uint64_t wr_id; /* work request id */
    int opcode;
    int qpNum;
    size_t length; /* bytes */
  } qp;
} ncclProfilerNetIbDescr_v1_t;

NCCL_ABI_SIZE(ncclProfilerNetIbDescr_v1_t, 40);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp, 8);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp.device, 8);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp.wr_id, 16);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp.opcode, 24);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp.qpNum, 28);
NCCL_ABI_OFFSET(ncclProfilerNetIbDescr_v1_t, qp.length, 32);

/* Socket, version 1: pluginId = NCCL_PROFILER_NET_TYPE_SOCK | 1. */
typedef struct {
  uint8_t type; /* event kind within the Socket descriptor space */
  struct {
    int fd;
    int op;
    size_t length; /* bytes */
  } sock;
} ncclProfilerNetSockDescr_v1_t;

NCCL_ABI_SIZE(ncclProfilerNetSockDescr_v1_t, 24);
NCCL_ABI_OFFSET(ncclProfilerNetSockDescr_v1_t, type, 0);
NCCL_ABI_OFFSET(ncclProfilerNetSockDescr_v1_t, sock, 8);
NCCL_ABI_OFFSET(ncclProfilerNetSockDescr_v1_t, sock.fd, 8);
NCCL_ABI_OFFSET(ncclProfilerNetSockDescr_v1_t, sock.op, 12);
NCCL_ABI_OFFSET(ncclProfilerNetSockDescr_v1_t, sock.length, 16);

#endif /* RESILIENT_NCCL_NET_PROFILER_H */
