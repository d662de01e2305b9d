/*
 * nccl-resilient: net plugin ABI v9 (NCCL 2.24, symbol ncclNetPlugin_v9):
 * ncclNetProperties_v9_t (docs/reference/nccl-abi.md §1.3, = v11 minus its last field) and
 * ncclNet_v9_t (§1.6, 20 slots). New over v8: size_t isend/irecv sizes,
 * forceFlush/vProps/maxP2pBytes/maxCollBytes in props, makeVDevice.
 */
#ifndef RESILIENT_NCCL_NET_V9_H
#define RESILIENT_NCCL_NET_V9_H

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
  int speed;       /* Mbps */
  int port;        /* used together with guid */
  float latency;   /* microseconds; 0 = NCCL default */
  int maxComms;
  int maxRecvs;                    /* max n of a grouped irecv; 1 disables grouping */
  ncclNetDeviceType netDeviceType; /* NCCL_NET_DEVICE_HOST for a host plugin */
  int netDeviceVersion;            /* NCCL_NET_DEVICE_INVALID_VERSION with HOST */
  ncclNetVDeviceProps_v9_t vProps; /* normally {1, {dev}} */
  size_t maxP2pBytes;              /* NCCL splits larger transfers; NCCL_MAX_NET_SIZE_BYTES */
  size_t maxCollBytes;             /* NCCL_MAX_NET_SIZE_BYTES */
} ncclNetProperties_v9_t;

NCCL_ABI_SIZE(ncclNetProperties_v9_t, 104);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, name, 0);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, pciPath, 8);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, guid, 16);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, ptrSupport, 24);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, regIsGlobal, 28);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, forceFlush, 32);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, speed, 36);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, port, 40);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, latency, 44);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, maxComms, 48);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, maxRecvs, 52);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, netDeviceType, 56);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, netDeviceVersion, 60);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, vProps, 64);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, maxP2pBytes, 88);
NCCL_ABI_OFFSET(ncclNetProperties_v9_t, maxCollBytes, 96);

/* NCCL wraps a v9 plugin in a v11-shaped adapter (init called once,
 * ref-counted). */
typedef struct {
  const char* name; /* data member: matched by NCCL_NET / config.netName */
  ncclResult_t (*init)(ncclDebugLogger_t logFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  /* Fill <= NCCL_NET_HANDLE_MAXSIZE bytes into handle; must not block. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking: success with *sendComm == NULL means "poll again".
   * sendDevComm may be NULL; *sendDevComm is NULL for host plugins. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v9_t** sendDevComm);
  /* Non-blocking: success with *recvComm == NULL means "poll again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* opt: NULL means no DMA-BUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* *request = NULL means "can't post now, retry". */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  /* *request is in/out: may be 0x1 on input; always overwrite it. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
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
  /* opt: NULL means no NIC fusion. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

NCCL_ABI_SIZE(ncclNet_v9_t, 160);
NCCL_ABI_OFFSET(ncclNet_v9_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v9_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v9_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v9_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v9_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v9_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v9_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v9_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v9_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v9_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v9_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v9_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v9_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v9_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v9_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v9_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v9_t, closeListen, 128);
NCCL_ABI_OFFSET(ncclNet_v9_t, getDeviceMr, 136);
NCCL_ABI_OFFSET(ncclNet_v9_t, irecvConsumed, 144);
NCCL_ABI_OFFSET(ncclNet_v9_t, makeVDevice, 152);

#endif /* RESILIENT_NCCL_NET_V9_H */
