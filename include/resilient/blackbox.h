/*
 * nccl-resilient blackbox, layout version 1: the shared-memory region through
 * which the plugins (writers, inside NCCL) and their consumers (the restart
 * library, the monitor process, resilient-inspect) see each other.
 *
 * One region per process: the file "resilient-blackbox-<pid>" in
 * NCCL_RESILIENT_BLACKBOX_DIR (default /dev/shm), created by the first plugin
 * init, removed when the process finishes cleanly and kept after a crash for
 * post-mortem reading.
 *
 * Concurrency: every slot has one writer at a time and a sequence word
 * (seqlock): the writer makes it odd, writes, makes it even again; a reader
 * copies the slot and retries when the word was odd or changed. Readers
 * never write, except the control word, which consumers set to tell the
 * plugins to fail fast.
 *
 * All integers are the host's byte order; times are nanoseconds, CLOCK_REALTIME
 * ("wall") or CLOCK_MONOTONIC ("mono") as named.
 */
#ifndef RESILIENT_BLACKBOX_H
#define RESILIENT_BLACKBOX_H

#include <stddef.h>
#include <stdint.h>

#define RESILIENT_BLACKBOX_MAGIC 0x58424c52u /* "RLBX" */
#define RESILIENT_BLACKBOX_VERSION 1u
#define RESILIENT_BLACKBOX_FILE_PREFIX "resilient-blackbox-"
#define RESILIENT_BLACKBOX_CONNECTIONS 1024
#define RESILIENT_BLACKBOX_FAULTS 64
#define RESILIENT_BLACKBOX_ADDRESS_CHARS 48
#define RESILIENT_BLACKBOX_HOST_CHARS 64
#define RESILIENT_BLACKBOX_FAULT_TEXT_CHARS 640

/* Bits of the control word. */
#define RESILIENT_BLACKBOX_CONTROL_FAIL_FAST 0x1u /* every request fails at its next call */

/* Connection states. */
#define RESILIENT_BLACKBOX_CONN_FREE 0u
#define RESILIENT_BLACKBOX_CONN_OPEN 1u
#define RESILIENT_BLACKBOX_CONN_FAULTED 2u

/* Fault classes (the net plugin's FaultClass). */
#define RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR 0u
#define RESILIENT_BLACKBOX_FAULT_PEER_EXITED 1u
#define RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE 2u
#define RESILIENT_BLACKBOX_FAULT_PEER_STUCK 3u
#define RESILIENT_BLACKBOX_FAULT_ABORTED 4u
#define RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR 5u
/* From the net plugin: no heartbeat answer within the liveness timeout while
 * the local interface that carries the link is down or has no carrier. */
#define RESILIENT_BLACKBOX_FAULT_LINK_DOWN 8u

typedef struct {
  uint32_t seq;       /* seqlock word */
  uint32_t state;     /* RESILIENT_BLACKBOX_CONN_* */
  uint64_t commId;    /* the communicator's id (commHash) */
  uint32_t direction; /* 0 send, 1 receive */
  uint32_t peerPid;   /* 0 until known */
  char local[RESILIENT_BLACKBOX_ADDRESS_CHARS];
  char peer[RESILIENT_BLACKBOX_ADDRESS_CHARS];
  char peerHost[RESILIENT_BLACKBOX_HOST_CHARS];
  uint64_t completedRequests;
  uint64_t completedBytes;
  uint64_t outstandingRequests;
  uint64_t outstandingBytes;
  uint64_t lastProgressMonoNs; /* last completion or bytes moved; 0 never */
  uint64_t updatedMonoNs;      /* when this snapshot was written */
} resilient_blackbox_connection;

typedef struct {
  uint32_t seq;        /* seqlock word; 0: slot never written */
  uint32_t faultClass; /* RESILIENT_BLACKBOX_FAULT_* */
  uint64_t number;     /* 1 for the process's first fault, 2 for the next, ... */
  uint64_t commId;
  uint64_t wallNs;
  uint64_t monoNs;
  uint32_t peerPid;
  uint32_t remote; /* 1: blamed on the peer (ncclRemoteError); 0: local */
  char peer[RESILIENT_BLACKBOX_ADDRESS_CHARS];
  char peerHost[RESILIENT_BLACKBOX_HOST_CHARS];
  char text[RESILIENT_BLACKBOX_FAULT_TEXT_CHARS]; /* the WARN that explained it */
} resilient_blackbox_fault;

typedef struct {
  uint32_t magic;   /* RESILIENT_BLACKBOX_MAGIC */
  uint32_t version; /* RESILIENT_BLACKBOX_VERSION */
  uint64_t size;    /* bytes of the whole region */
  uint32_t pid;
  uint32_t connectionSlots; /* RESILIENT_BLACKBOX_CONNECTIONS */
  uint32_t faultSlots;      /* RESILIENT_BLACKBOX_FAULTS */
  uint32_t control;         /* RESILIENT_BLACKBOX_CONTROL_* bits, set by consumers */
  char host[RESILIENT_BLACKBOX_HOST_CHARS];
  uint64_t startWallNs;
  uint64_t heartbeatMonoNs; /* the plugin's watchdog thread, each tick */
  uint64_t heartbeatWallNs;
  uint64_t faultCount;       /* faults recorded so far; slot = (number - 1) % faultSlots */
  uint64_t connectionOffset; /* byte offsets of the arrays from the region's start */
  uint64_t faultOffset;
} resilient_blackbox_header;

#define RESILIENT_BLACKBOX_SIZE                                             \
  (sizeof(resilient_blackbox_header) +                                      \
   RESILIENT_BLACKBOX_CONNECTIONS * sizeof(resilient_blackbox_connection) + \
   RESILIENT_BLACKBOX_FAULTS * sizeof(resilient_blackbox_fault))

#ifdef __cplusplus
#define RESILIENT_BLACKBOX_ASSERT(expr, what) static_assert(expr, what)
#else
#define RESILIENT_BLACKBOX_ASSERT(expr, what) _Static_assert(expr, what)
#endif
/* The layout is ABI between processes (and builds): it never changes within a version. */
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_connection) == 232,
                          "blackbox v1 connection slot");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_fault) == 800, "blackbox v1 fault slot");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_header) == 144, "blackbox v1 header");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_header, control) == 28,
                          "blackbox v1 control");

#endif /* RESILIENT_BLACKBOX_H */
