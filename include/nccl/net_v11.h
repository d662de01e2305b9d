/*
 * nccl-resilient: net plugin ABI v11 (NCCL 2.28.3+, symbol
 * ncclNetPlugin_v11, the newest one NCCL 2.28.9 looks up):
 * ncclNetProperties_v11_t (docs/reference/nccl-abi.md §1.3) and ncclNet_v11_t (§1.5, 22
 * slots), with the call contract of §1.8 in brief. NCCL uses a v11 struct
 * directly: every pointer is called as exported, without an adapter.
 */
#ifndef RESILIENT_NCCL_NET_V11_H
#define RESILIENT_NCCL_NET_V11_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/result.h"

typedef struct {
  char* name;      /* for logs */
  char* pciPath;   /* sysfs PCI device dir, or NULL for a virtual device */
  uint64_t guid;   /* NIC identity; same guid = same port */
  int ptrSupport;  /* NCCL_PTR_* bits */
  int regIsGlobal; /* 1 if registrations are not tied to a comm (cache) */
  int forceFlush;  /* 1 = NCCL calls iflush after every receive */
  int speed;       /* Mbps (100000 = 100 Gb/s) */
  int port;        /* used together with guid */
  float latency;   /* microseconds; 0 = NCCL default */
  int maxComms;
  int maxRecvs;                     /* max n of a grouped irecv; 1 disables grouping */
  ncclNetDeviceType netDeviceType;  /* NCCL_NET_DEVICE_HOST for a host plugin */
  int netDeviceVersion;             /* NCCL_NET_DEVICE_INVALID_VERSION with HOST */
  ncclNetVDeviceProps_v11_t vProps; /* normally {1, {dev}} */
  size_t maxP2pBytes;               /* NCCL splits larger transfers; NCCL_MAX_NET_SIZE_BYTES */
  size_t maxCollBytes;              /* NCCL_MAX_NET_SIZE_BYTES */
  int maxMultiRequestSize;          /* set 1; the 2.28.9 core never reads it */
} ncclNetProperties_v11_t;

NCCL_ABI_SIZE(ncclNetProperties_v11_t, 112);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, name, 0);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, pciPath, 8);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, guid, 16);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, ptrSupport, 24);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, regIsGlobal, 28);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, forceFlush, 32);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, speed, 36);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, port, 40);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, latency, 44);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, maxComms, 48);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, maxRecvs, 52);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, netDeviceType, 56);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, netDeviceVersion, 60);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, vProps, 64);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, maxP2pBytes, 88);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, maxCollBytes, 96);
NCCL_ABI_OFFSET(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

/* Members marked opt may be NULL (NCCL checks first); NCCL calls all the
 * others unconditionally. Never return ncclInProgress: NCCL reads it as
 * success. */
typedef struct {
  const char* name; /* data member: matched by NCCL_NET / config.netName */
  /* Once per communicator, before bootstrap (rank/nranks unknown; commId
   * known); *ctx is this communicator's context. profFn is a no-op without
   * a profiler. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn);
  /* Called only the first time the library is initialised; needs *ndev > 0. */
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  /* Fill <= NCCL_NET_HANDLE_MAXSIZE bytes into handle; return a non-NULL
   * *listenComm; must not block. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  /* Non-blocking: success with *sendComm == NULL means "poll again" (NCCL
   * has no timeout of its own). sendDevComm may be NULL; *sendDevComm is
   * NULL for host plugins. */
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  /* Non-blocking: success with *recvComm == NULL means "poll again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
  /* type: one NCCL_PTR_* value. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* opt: NULL means no DMA-BUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* tag = sender's rank. *request = NULL means "can't post now, retry".
   * phandle: opaque profiler parent for profFn; may be NULL. */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  /* n <= maxRecvs; tags[i] = remote rank; sizes[i] >= the incoming size.
   * *request is in/out: may be 0x1 (NCCL_NET_OPTIONAL_RECV_COMPLETION) on
   * input; always overwrite it. phandles may be NULL. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  /* *request = NULL means nothing to wait for. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  /* sizes may be NULL, else 1 int (send) or n ints (recv). After *done = 1
   * NCCL forgets the request. Any error is fatal for the communicator. */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* opt: device offload only. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  /* opt: NULL for a host plugin; called with an already-completed request. */
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* opt: NULL means no NIC fusion. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  /* Called unconditionally, even after a failed init: ctx may be NULL or
   * unset. The library may be dlclose'd after the last finalize. */
  ncclResult_t (*finalize)(void* ctx);
  /* opt: per-op and connect-time hints; the return value is ignored. */
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* attr);
} ncclNet_v11_t;

NCCL_ABI_SIZE(ncclNet_v11_t, 176);
NCCL_ABI_OFFSET(ncclNet_v11_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v11_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v11_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v11_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v11_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v11_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v11_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v11_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v11_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v11_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v11_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v11_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v11_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v11_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v11_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v11_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v11_t, closeListen, 128);
NCCL_ABI_OFFSET(ncclNet_v11_t, getDeviceMr, 136);
NCCL_ABI_OFFSET(ncclNet_v11_t, irecvConsumed, 144);
NCCL_ABI_OFFSET(ncclNet_v11_t, makeVDevice, 152);
NCCL_ABI_OFFSET(ncclNet_v11_t, finalize, 160);
NCCL_ABI_OFFSET(ncclNet_v11_t, setNetAttr, 168);

#endif /* RESILIENT_NCCL_NET_V11_H */
