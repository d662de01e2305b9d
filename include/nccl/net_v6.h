/*
 * nccl-resilient: net plugin ABI v6 (≈NCCL 2.12/2.13), the oldest version
 * NCCL 2.28.9 still loads (symbol ncclNetPlugin_v6): ncclNetProperties_v6_t
 * (docs/reference/nccl-abi.md §1.3) and ncclNet_v6_t (§1.6, 17 slots). Baseline: no device
 * type in props, no device handle on connect/accept, int sizes.
 */
#ifndef RESILIENT_NCCL_NET_V6_H
#define RESILIENT_NCCL_NET_V6_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/result.h"

typedef struct {
  char* name;     /* for logs */
  char* pciPath;  /* sysfs PCI device dir, or NULL for a virtual device */
  uint64_t guid;  /* NIC identity; same guid = same port */
  int ptrSupport; /* NCCL_PTR_* bits */
  int speed;      /* Mbps */
  int port;       /* used together with guid */
  float latency;  /* microseconds; 0 = NCCL default */
  int maxComms;
  int maxRecvs; /* max n of a grouped irecv; 1 disables grouping */
} ncclNetProperties_v6_t;

NCCL_ABI_SIZE(ncclNetProperties_v6_t, 48);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, name, 0);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, pciPath, 8);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, guid, 16);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, ptrSupport, 24);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, speed, 28);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, port, 32);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, latency, 36);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, maxComms, 40);
NCCL_ABI_OFFSET(ncclNetProperties_v6_t, maxRecvs, 44);

/* NCCL wraps a v6 plugin in a v11-shaped adapter (init called once,
 * ref-counted; sizes above INT_MAX give ncclInternalError). */
typedef struct {
  const char* name; /* data member: matched by NCCL_NET / config.netName */
  ncclResult_t (*init)(ncclDebugLogger_t logFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  /* Fill <= NCCL_NET_HANDLE_MAXSIZE bytes into handle; must not block. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking: success with *sendComm == NULL means "poll again". */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  /* Non-blocking: success with *recvComm == NULL means "poll again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  /* opt: NULL means no DMA-BUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* *request = NULL means "can't post now, retry". */
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  /* *request is in/out: may be 0x1 on input; always overwrite it. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  /* *request = NULL means nothing to wait for. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  /* sizes may be NULL; any error is fatal for the communicator. */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclNet_v6_t;

NCCL_ABI_SIZE(ncclNet_v6_t, 136);
NCCL_ABI_OFFSET(ncclNet_v6_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v6_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v6_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v6_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v6_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v6_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v6_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v6_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v6_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v6_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v6_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v6_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v6_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v6_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v6_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v6_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v6_t, closeListen, 128);

#endif /* RESILIENT_NCCL_NET_V6_H */
