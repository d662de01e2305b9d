/*
 * nccl-resilient: net plugin ABI v12 (NCCL 2.30, symbol ncclNetPlugin_v12,
 * the first one NCCL 2.30 looks up). The table has v11's 22 slots with the
 * same meaning (net_v11.h; the call contract of docs/net-plugin.md); what
 * changed is the properties: vProps holds up to 8 fused devices (v11: 4),
 * which moves every later field, and two fields were added at the end,
 * railId and planeId, which NCCL 2.30's topology search uses to pair NICs of
 * the same rail across nodes and to keep NICs of different planes apart
 * (NCCL_NET_ID_UNDEF: not known). NCCL calls a v12 table directly.
 */
#ifndef RESILIENT_NCCL_NET_V12_H
#define RESILIENT_NCCL_NET_V12_H

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
  int regIsGlobal; /* 1 if registrations are not tied to a comm */
  int forceFlush;  /* 1 = NCCL calls iflush after every receive */
  int speed;       /* Mbps */
  int port;        /* used together with guid */
  float latency;   /* microseconds; 0 = NCCL default */
  int maxComms;
  int maxRecvs;                     /* max n of a grouped irecv */
  ncclNetDeviceType netDeviceType;  /* NCCL_NET_DEVICE_HOST for a host plugin */
  int netDeviceVersion;             /* NCCL_NET_DEVICE_INVALID_VERSION with HOST */
  ncclNetVDeviceProps_v12_t vProps; /* normally {1, {dev}} */
  size_t maxP2pBytes;               /* NCCL_MAX_NET_SIZE_BYTES */
  size_t maxCollBytes;              /* NCCL_MAX_NET_SIZE_BYTES */
  int maxMultiRequestSize;          /* 1 */
  int16_t railId;                   /* the rail of this device, or NCCL_NET_ID_UNDEF */
  int16_t planeId;                  /* the plane of this device, or NCCL_NET_ID_UNDEF */
} ncclNetProperties_v12_t;

NCCL_ABI_SIZE(ncclNetProperties_v12_t, 128);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, name, 0);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, pciPath, 8);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, guid, 16);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, ptrSupport, 24);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, regIsGlobal, 28);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, forceFlush, 32);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, speed, 36);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, port, 40);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, latency, 44);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, maxComms, 48);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, maxRecvs, 52);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, netDeviceType, 56);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, netDeviceVersion, 60);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, vProps, 64);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, maxP2pBytes, 104);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, maxCollBytes, 112);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, railId, 124);
NCCL_ABI_OFFSET(ncclNetProperties_v12_t, planeId, 126);

/* The slots of ncclNet_v11_t (net_v11.h has the contract of each), with the
 * v12 properties and vProps types. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* attr);
} ncclNet_v12_t;

NCCL_ABI_SIZE(ncclNet_v12_t, 176);
NCCL_ABI_OFFSET(ncclNet_v12_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v12_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v12_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v12_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v12_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v12_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v12_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v12_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v12_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v12_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v12_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v12_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v12_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v12_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v12_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v12_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v12_t, closeListen, 128);
NCCL_ABI_OFFSET(ncclNet_v12_t, getDeviceMr, 136);
NCCL_ABI_OFFSET(ncclNet_v12_t, irecvConsumed, 144);
NCCL_ABI_OFFSET(ncclNet_v12_t, makeVDevice, 152);
NCCL_ABI_OFFSET(ncclNet_v12_t, finalize, 160);
NCCL_ABI_OFFSET(ncclNet_v12_t, setNetAttr, 168);

#endif /* RESILIENT_NCCL_NET_V12_H */
