/*
 * nccl-resilient: net plugin ABI v10 (NCCL 2.26.2, symbol
 * ncclNetPlugin_v10): ncclNetProperties_v10_t (docs/reference/nccl-abi.md §1.3, same layout
 * as v9, so an alias) and ncclNet_v10_t (§1.6, 20 slots). New over v9:
 * init takes the profiler callback, connect takes a per-communicator
 * config, isend/irecv take profiler phandle(s).
 */
#ifndef RESILIENT_NCCL_NET_V10_H
#define RESILIENT_NCCL_NET_V10_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/net_v9.h"
#include "nccl/result.h"

typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

NCCL_ABI_SIZE(ncclNetProperties_v10_t, 104);

/* NCCL wraps a v10 plugin in a v11-shaped adapter (init called once,
 * ref-counted; the adapter keeps the config NCCL gives v11 init and passes
 * it to connect). */
typedef struct {
  const char* name; /* data member: matched by NCCL_NET / config.netName */
  /* profFn: NCCL's callback, a no-op without a profiler (§1.10). */
  ncclResult_t (*init)(ncclDebugLogger_t logFn, ncclProfilerCallback_t profFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  /* Fill <= NCCL_NET_HANDLE_MAXSIZE bytes into handle; must not block. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking: success with *sendComm == NULL means "poll again".
   * sendDevComm may be NULL; *sendDevComm is NULL for host plugins. */
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  /* Non-blocking: success with *recvComm == NULL means "poll again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* opt: NULL means no DMA-BUF support. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* *request = NULL means "can't post now, retry". phandle: opaque profiler
   * parent for profFn; may be NULL (bootstrap path). */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  /* *request is in/out: may be 0x1 on input; always overwrite it.
   * phandles may be NULL. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

NCCL_ABI_SIZE(ncclNet_v10_t, 160);
NCCL_ABI_OFFSET(ncclNet_v10_t, name, 0);
NCCL_ABI_OFFSET(ncclNet_v10_t, init, 8);
NCCL_ABI_OFFSET(ncclNet_v10_t, devices, 16);
NCCL_ABI_OFFSET(ncclNet_v10_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclNet_v10_t, listen, 32);
NCCL_ABI_OFFSET(ncclNet_v10_t, connect, 40);
NCCL_ABI_OFFSET(ncclNet_v10_t, accept, 48);
NCCL_ABI_OFFSET(ncclNet_v10_t, regMr, 56);
NCCL_ABI_OFFSET(ncclNet_v10_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclNet_v10_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclNet_v10_t, isend, 80);
NCCL_ABI_OFFSET(ncclNet_v10_t, irecv, 88);
NCCL_ABI_OFFSET(ncclNet_v10_t, iflush, 96);
NCCL_ABI_OFFSET(ncclNet_v10_t, test, 104);
NCCL_ABI_OFFSET(ncclNet_v10_t, closeSend, 112);
NCCL_ABI_OFFSET(ncclNet_v10_t, closeRecv, 120);
NCCL_ABI_OFFSET(ncclNet_v10_t, closeListen, 128);
NCCL_ABI_OFFSET(ncclNet_v10_t, getDeviceMr, 136);
NCCL_ABI_OFFSET(ncclNet_v10_t, irecvConsumed, 144);
NCCL_ABI_OFFSET(ncclNet_v10_t, makeVDevice, 152);

#endif /* RESILIENT_NCCL_NET_V10_H */
