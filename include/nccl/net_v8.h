/*
 * nccl-resilient: net plugin ABI v8 (NCCL 2.20, symbol ncclNetPlugin_v8):
 * ncclNetProperties_v8_t (docs/reference/nccl-abi.md §1.3) and ncclNet_v8_t (§1.6, 19
 * slots). New over v7: regIsGlobal in props, regMr takes a size_t size.
 */
#ifndef RESILIENT_NCCL_NET_V8_H
#define RESILIENT_NCCL_NET_V8_H

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
  int speed;       /* Mbps */
  int port;        /* used together with guid */
  float latency;   /* microseconds; 0 = NCCL default */
  int maxComms;
  int maxRecvs;                    /* max n of a grouped irecv; 1 disables grouping */
  ncclNetDeviceType netDeviceType; /* NCCL_NET_DEVICE_HOST for a host plugin */
  int netDeviceVersion;            /* NCCL_NET_DEVICE_INVALID_VERSION with HOST */
} ncclNetProperties_v8_t;

NCCL_ABI_SIZE(ncclNetProperties_v8_t, 64);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, name, 0);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, pciPath, 8);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, guid, 16);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, ptrSupport, 24);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, regIsGlobal, 28);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, speed, 32);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, port, 36);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, latency, 40);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, maxComms, 44);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, maxRecvs, 48);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, netDeviceType, 52);
NCCL_ABI_OFFSET(ncclNetProperties_v8_t, netDeviceVersion, 56);

/* NCCL wraps a v8 plugin in a v11-shaped adapter (init called once,
 * ref-counted; sizes above INT_MAX give ncclInternalError). */
typedef struct {
  const char* name; /* data member: matched by NCCL_NET / config.netName */
  ncclResult_t (*init)(ncclDebugLogger_t logFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  /* Fill <= NCCL_NET_HANDLE_MAXSIZE bytes into handle; must not block. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking: success with *sendComm == NULL means "poll again".
   * sendDevComm may be NULL; *sendDevComm is NULL for host plugins. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  /* Non-blocking: success with *recvComm == NULL means "poll again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
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
  /* opt: device offload only. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  /* opt: NULL for a host plugin; called with an already-completed request. */
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

NCCL_ABI_SIZE(ncclNet_v8_t, 152);
NCCL_ABI_OFFSET(ncclNet_v8_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v8_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v8_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v8_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v8_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v8_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v8_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v8_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v8_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v8_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v8_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v8_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v8_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v8_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v8_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v8_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v8_t, closeListen, 128);
NCCL_ABI_OFFSET(ncclNet_v8_t, getDeviceMr, 136);
NCCL_ABI_OFFSET(ncclNet_v8_t, irecvConsumed, 144);

#endif /* RESILIENT_NCCL_NET_V8_H */
