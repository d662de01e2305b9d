/*
 * nccl-resilient blackbox, layout version 4: the shared-memory region through
 * which the plugins (writers, inside NCCL) and their consumers (the restart
 * library, the monitor process, resilient-inspect) see each other.
 *
 * One region per process: the file "resilient-blackbox-<pid>" in
 * NCCL_RESILIENT_BLACKBOX_DIR (default /dev/shm), created by the first plugin
 * init, removed when the process finishes cleanly and kept after a crash for
 * post-mortem reading. Several plugin libraries of one process (the net
 * plugin, and the profiler loaded from libnccl-profiler-resilient.so) attach
 * to the same region; the last one to detach removes it.
 *
 * Sections, each at the byte offset the header gives:
 *  - connections: the net plugin's connections (one slot each);
 *  - faults: a ring of fault records (net and profiler);
 *  - communicators: the profiler's communicator table;
 *  - flight recorder: per communicator slot, a ring of the last `flightOps`
 *    operations (collectives and p2p) with their timings.
 *
 * Version history: 1 = header, connections, faults. 2 = adds the header fields
 * after faultOffset, the fault fields after text, the communicator table and
 * the flight recorder. 3 = adds the connection fields after updatedMonoNs
 * (busy time, liveness round trip) and the report classes of the fault ring
 * (slow link, straggler: findings, not faults). 4 = adds the operation fields
 * after lastStepState (profiler ABI v7: the user tag, the GPU-timed initial
 * sync, the operation's flags); the operation record grows from 200 to 224
 * bytes, and with it the communicator slot (its `oldest`) from 504 to 528.
 *
 * Concurrency: every slot has one writer at a time and a sequence word
 * (seqlock): the writer makes it odd, writes, makes it even again; a reader
 * copies the slot and retries when the word was odd or changed. Readers
 * never write, except the control word, which consumers set to tell the
 * plugins to fail fast, and report records, which consumers append to the
 * fault ring as the plugins append faults (number by atomic increment).
 *
 * All integers are the host's byte order; times are nanoseconds, CLOCK_REALTIME
 * ("wall") or CLOCK_MONOTONIC ("mono") as named.
 */
#ifndef RESILIENT_BLACKBOX_H
#define RESILIENT_BLACKBOX_H

#include <stddef.h>
#include <stdint.h>

#define RESILIENT_BLACKBOX_MAGIC 0x58424c52u /* "RLBX" */
#define RESILIENT_BLACKBOX_VERSION 4u
#define RESILIENT_BLACKBOX_FILE_PREFIX "resilient-blackbox-"
#define RESILIENT_BLACKBOX_CONNECTIONS 1024
#define RESILIENT_BLACKBOX_FAULTS 64
#define RESILIENT_BLACKBOX_ADDRESS_CHARS 48
#define RESILIENT_BLACKBOX_HOST_CHARS 64
#define RESILIENT_BLACKBOX_FAULT_TEXT_CHARS 640
#define RESILIENT_BLACKBOX_COMMS 256 /* communicator slots */
/* The longest flight-recorder ring per communicator. */
#define RESILIENT_BLACKBOX_FLIGHT_OPS_MAX 65536
#define RESILIENT_BLACKBOX_COMM_NAME_CHARS 64
#define RESILIENT_BLACKBOX_LABEL_CHARS 16 /* op, datatype, algorithm, protocol names */
#define RESILIENT_BLACKBOX_FUNCS 12       /* NCCL's ncclFunc_t values 0..10, and 11 = other */

/* Bits of the control word. */
#define RESILIENT_BLACKBOX_CONTROL_FAIL_FAST 0x1u /* every request fails at its next call */
/* The upper 16 bits count this process's aborts: a consumer that sets
 * FAIL_FAST adds ABORT_EPOCH_ONE first. A connection made before the current
 * epoch belongs to a communicator that was aborted: a fault found on it later
 * (a peer closing its side of the same aborted communicator) is class ABORTED,
 * not a new fault. */
#define RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_SHIFT 16u
#define RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_ONE \
  (1u << RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_SHIFT)

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
/* From the profiler (version 2): an operation whose kernels started made no
 * progress (kernel channels, proxy steps) for NCCL_RESILIENT_COLL_TIMEOUT_MS. */
#define RESILIENT_BLACKBOX_FAULT_COLL_HUNG 6u
/* From the profiler (version 2): operations were enqueued but the
 * communicator's proxy progress thread reported nothing at all (no kernel
 * channel, proxy op or step event) for NCCL_RESILIENT_COLL_TIMEOUT_MS: the
 * progress thread died (a net error) or the GPU never reached the kernels. */
#define RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT 7u
/* From the net plugin: no heartbeat answer within the liveness timeout while
 * the local interface that carries the link is down or has no carrier. */
#define RESILIENT_BLACKBOX_FAULT_LINK_DOWN 8u
/* From the net plugin: the peer process closed its side (goodbye on the
 * liveness link) while requests to it were outstanding; when it closed because
 * of a fault of its own, the fault text names that fault and its culprit. */
#define RESILIENT_BLACKBOX_FAULT_PEER_CLOSED 9u
/* Reports (version 3): findings written into the fault ring by a consumer
 * that compared the ranks of a job (the restart library, resilient-inspect
 * --job). They are not faults: nothing aborts because of them, and readers
 * that look for faults skip them (RESILIENT_BLACKBOX_IS_REPORT). */
#define RESILIENT_BLACKBOX_FAULT_SLOW_LINK 10u /* a link far slower than its peers */
#define RESILIENT_BLACKBOX_FAULT_STRAGGLER 11u /* a rank persistently last to a collective */
#define RESILIENT_BLACKBOX_FAULT_STUCK_RANK 12u /* a live rank the others wait for, for long */
#define RESILIENT_BLACKBOX_IS_REPORT(faultClass) \
  ((faultClass) == RESILIENT_BLACKBOX_FAULT_SLOW_LINK || \
   (faultClass) == RESILIENT_BLACKBOX_FAULT_STRAGGLER || \
   (faultClass) == RESILIENT_BLACKBOX_FAULT_STUCK_RANK)

/* Communicator slot states. A finalized slot keeps its last contents for
 * post-mortem reading until a new communicator needs the slot. */
#define RESILIENT_BLACKBOX_COMM_FREE 0u
#define RESILIENT_BLACKBOX_COMM_ACTIVE 1u
#define RESILIENT_BLACKBOX_COMM_FINALIZED 2u

/* Operation kinds. */
#define RESILIENT_BLACKBOX_OP_COLL 1u
#define RESILIENT_BLACKBOX_OP_P2P 2u

/* Operation states. */
#define RESILIENT_BLACKBOX_OP_NONE 0u      /* slot never written */
#define RESILIENT_BLACKBOX_OP_ENQUEUED 1u  /* posted to the proxy; no kernel channel seen yet */
#define RESILIENT_BLACKBOX_OP_RUNNING 2u   /* kernels (or proxy ops) started, not all finished */
#define RESILIENT_BLACKBOX_OP_COMPLETED 3u /* every channel's kernel finished */
#define RESILIENT_BLACKBOX_OP_HUNG 4u      /* in flight and reported as a fault */
#define RESILIENT_BLACKBOX_OP_ABANDONED 5u /* the communicator was finalized or aborted first */

/* Operation flags (version 4). */
/* Run by a symmetric kernel (profiler v7 coll.isSymColl). Its initial sync
 * ends when the kernel's opening barrier with every peer completes, so
 * syncWaitNs is how long this rank waited for the last one to arrive: the
 * arrival skew as the GPU measured it (NCCL 2.31.2 src/device/symmetric/:
 * bar.wait, then ncclSymkProfilerPhase(AFTER_OPEN)). A classic kernel ends its
 * initial sync before it exchanges anything with a peer (src/device/common.h,
 * RunWorkBatch::run: the stamp precedes the work loop): there it is only the
 * kernel's own prologue. */
#define RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC 0x1u

typedef struct {
  uint32_t seq;       /* seqlock word */
  uint32_t state;     /* RESILIENT_BLACKBOX_CONN_* */
  uint64_t commId;    /* the communicator's id (commHash) */
  uint32_t direction; /* 0 send, 1 receive, 2 CollNet (collective comm) */
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
  /* Version 3. */
  uint64_t busyNs; /* how long the link was busy, sampled at each watchdog tick: a send link
                      with bytes the inner transport has not sent yet (our TCP: the kernel's
                      unsent bytes), else with requests outstanding. completedBytes over
                      busyNs is the throughput while busy */
  uint64_t rttNs;  /* the last heartbeat round trip to the peer process; 0 unknown */
} resilient_blackbox_connection;

typedef struct {
  uint32_t seq;        /* seqlock word; 0: slot never written */
  uint32_t faultClass; /* RESILIENT_BLACKBOX_FAULT_* */
  uint64_t number;     /* 1 for the process's first fault, 2 for the next, ... */
  uint64_t commId;
  uint64_t wallNs;
  uint64_t monoNs;
  uint32_t peerPid; /* the process blamed (root cause): the connection's peer, the first
                       fault that peer named, or this process for a local error; 0 unknown */
  uint32_t remote;  /* 1: ncclRemoteError; 0: local */
  char peer[RESILIENT_BLACKBOX_ADDRESS_CHARS];    /* the connection's peer endpoint */
  char peerHost[RESILIENT_BLACKBOX_HOST_CHARS];   /* the blamed process's host */
  char text[RESILIENT_BLACKBOX_FAULT_TEXT_CHARS]; /* the WARN that explained it */
  /* Version 2, filled by the profiler's faults (zero in the net plugin's). */
  int32_t rank;           /* this process's rank in commId; -1 unknown */
  uint32_t opKind;        /* RESILIENT_BLACKBOX_OP_*; 0 none */
  uint64_t collIndex;     /* 1-based ordinal of the collective on the communicator */
  uint64_t seqNumber;     /* NCCL's per-function sequence number of the operation */
  uint64_t stuckChannels; /* bit c: channel c started and did not finish */
  uint64_t stalledMs;     /* how long nothing moved */
  char op[RESILIENT_BLACKBOX_LABEL_CHARS]; /* "AllReduce", ... */
} resilient_blackbox_fault;

/* One operation (collective or point-to-point) as the profiler saw it: an
 * entry of a flight-recorder ring, or a communicator's oldest operation in
 * flight. Times: "MonoNs" host CLOCK_MONOTONIC; "gpu" the GPU's
 * %globaltimer (profiler ABI v4 and later; 0 when unknown). */
typedef struct {
  uint32_t seq;       /* seqlock word (ring entries) */
  uint32_t state;     /* RESILIENT_BLACKBOX_OP_* */
  uint64_t commId;    /* the communicator it belongs to */
  uint64_t opIndex;   /* 1-based ordinal among all operations of the communicator */
  uint64_t collIndex; /* 1-based ordinal among its collectives (same on every rank); 0: p2p */
  uint64_t seqNumber; /* NCCL's per-function counter (collectives) */
  uint32_t kind;      /* RESILIENT_BLACKBOX_OP_COLL or _P2P */
  uint32_t funcIndex; /* ncclFunc_t value, RESILIENT_BLACKBOX_FUNCS - 1 if unknown */
  int32_t rootOrPeer; /* collective root, or the p2p peer */
  uint32_t nChannels; /* channels the operation runs on (v4+; 0 unknown) */
  uint64_t count;     /* elements */
  uint64_t bytes;     /* count x element size; 0 unknown */
  char func[RESILIENT_BLACKBOX_LABEL_CHARS];
  char datatype[RESILIENT_BLACKBOX_LABEL_CHARS];
  char algo[RESILIENT_BLACKBOX_LABEL_CHARS];
  char proto[RESILIENT_BLACKBOX_LABEL_CHARS];
  uint64_t
      channelsStarted;    /* bit c: the kernel (v3+) or a proxy op (v1, v2) started on channel c */
  uint64_t channelsDone;  /* bit c: ... and finished */
  uint64_t enqueueMonoNs; /* NCCL posted it (Coll/P2p event) */
  uint64_t startMonoNs;   /* first kernel channel (or proxy op) seen; 0 not yet */
  uint64_t endMonoNs;     /* completion seen; 0 not yet */
  uint64_t gpuStartNs;    /* earliest kernel channel start */
  uint64_t gpuStopNs;     /* latest kernel channel stop */
  uint32_t proxyOps;      /* proxy operations started */
  uint32_t lastStepState; /* last proxy-step state (ncclProfilerEventState_t), 0 none */
  /* Version 4 (profiler ABI v7, NCCL 2.31+; 0 with earlier versions). */
  uint64_t userTag;    /* the call's ncclCollConfig_t.userProfilerTag; 0 untagged */
  uint64_t syncWaitNs; /* the longest initial-sync kernel phase over its channels, GPU
                          %globaltimer ns; 0 unknown (a measured 0 is stored as 1) */
  uint32_t opFlags;    /* RESILIENT_BLACKBOX_OP_FLAG_* */
  uint32_t reserved0;
} resilient_blackbox_op;

/* One communicator the profiler tracks. Counters are monotonic over the
 * communicator's life; comparing them across the ranks of one commId shows
 * who is behind. */
typedef struct {
  uint32_t seq;        /* seqlock word */
  uint32_t state;      /* RESILIENT_BLACKBOX_COMM_* */
  uint64_t commId;     /* commHash: the same on every rank (and the net plugin's commId) */
  int32_t rank;        /* -1 until known (profiler v1-v3 learn it from the first operation) */
  int32_t nranks;      /* 0 unknown (v1-v3) */
  int32_t nNodes;      /* 0 unknown (v1-v3) */
  uint32_t abiVersion; /* profiler ABI version NCCL uses, 1..7 */
  char name[RESILIENT_BLACKBOX_COMM_NAME_CHARS]; /* ncclConfig_t.commName, may be empty */
  uint64_t initWallNs;
  uint64_t initMonoNs;
  uint64_t updatedMonoNs; /* when this snapshot was written */
  uint64_t collEnqueued;  /* highest collIndex enqueued */
  uint64_t collStarted;   /* highest collIndex whose kernels started */
  uint64_t collCompleted; /* highest collIndex completed */
  uint64_t p2pEnqueued;   /* p2p operations enqueued */
  uint64_t p2pCompleted;  /* p2p operations completed */
  uint64_t inFlight;      /* operations enqueued and not completed */
  uint64_t lastEnqueueMonoNs;
  uint64_t lastProgressMonoNs; /* last proxy-thread event seen (detector resolution) */
  uint64_t
      completedByFunc[RESILIENT_BLACKBOX_FUNCS]; /* per ncclFunc_t: last completed seqNumber + 1 */
  uint64_t flightWritten; /* flight-recorder entries written; the newest is (flightWritten - 1) %
                             flightOps */
  uint64_t faults;        /* faults the profiler reported for this communicator */
  uint64_t droppedEvents; /* events not tracked (pool exhausted, unknown handle) */
  resilient_blackbox_op oldest; /* the oldest operation in flight; oldest.opIndex == 0: none */
} resilient_blackbox_comm;

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
  /* Version 2. */
  uint64_t processStartTicks; /* field 22 of /proc/<pid>/stat: tells this process's region from
                                 a stale file of an earlier process with the same pid */
  uint32_t attachCount;       /* plugin libraries attached; the last to detach removes the file */
  uint32_t commSlots;         /* RESILIENT_BLACKBOX_COMMS */
  uint32_t flightOps;         /* ring length per communicator slot */
  uint32_t reserved0;
  uint64_t commOffset;
  uint64_t flightOffset; /* ring of comm slot i: flightOffset + i * flightOps * sizeof(op) */
} resilient_blackbox_header;

/* Bytes of a region whose flight-recorder rings hold `flightOps` entries. */
#define RESILIENT_BLACKBOX_SIZE_FOR(flightOps)                              \
  (sizeof(resilient_blackbox_header) +                                      \
   RESILIENT_BLACKBOX_CONNECTIONS * sizeof(resilient_blackbox_connection) + \
   RESILIENT_BLACKBOX_FAULTS * sizeof(resilient_blackbox_fault) +           \
   RESILIENT_BLACKBOX_COMMS * sizeof(resilient_blackbox_comm) +             \
   (size_t)RESILIENT_BLACKBOX_COMMS * (size_t)(flightOps) * sizeof(resilient_blackbox_op))

#ifdef __cplusplus
#define RESILIENT_BLACKBOX_ASSERT(expr, what) static_assert(expr, what)
#else
#define RESILIENT_BLACKBOX_ASSERT(expr, what) _Static_assert(expr, what)
#endif
/* The layout is ABI between processes (and builds): it never changes within a version. */
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_connection) == 248,
                          "blackbox v3 connection slot");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_connection, busyNs) == 232,
                          "blackbox v3 connection slot");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_fault) == 856, "blackbox v2 fault slot");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_fault, rank) == 800, "blackbox v2 fault");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_fault, op) == 840, "blackbox v2 fault");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_op) == 224, "blackbox v4 operation");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_op, func) == 72, "blackbox v2 operation");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_op, channelsStarted) == 136,
                          "blackbox v2 operation");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_op, userTag) == 200, "blackbox v4 operation");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_op, syncWaitNs) == 208,
                          "blackbox v4 operation");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_op, opFlags) == 216, "blackbox v4 operation");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_comm) == 528, "blackbox v4 communicator");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_comm, completedByFunc) == 184,
                          "blackbox v2 communicator");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_comm, oldest) == 304,
                          "blackbox v2 communicator");
RESILIENT_BLACKBOX_ASSERT(sizeof(resilient_blackbox_header) == 184, "blackbox v2 header");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_header, control) == 28,
                          "blackbox control word");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_header, faultOffset) == 136,
                          "blackbox v1 part of the header");
RESILIENT_BLACKBOX_ASSERT(offsetof(resilient_blackbox_header, commOffset) == 168,
                          "blackbox v2 header");

#endif /* RESILIENT_BLACKBOX_H */
