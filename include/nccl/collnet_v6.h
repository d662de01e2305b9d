/*
 * nccl-resilient: collective-network plugin ABI v6 (symbol ncclCollNetPlugin_v6),
 * ncclCollNet_v6_t: the first CollNet ABI we declare (NCCL 2.12-2.18). Our own declaration of the member order
 * (NCCL src/include/plugin/net/net_v6.h read for facts; /work/notes fact sheet §6).
 * NCCL looks the symbol up in the net plugin's library (src/plugin/net.cc,
 * ncclNetPluginLoad), newest first.
 *
 * dataType/redOp are declared int: they carry NCCL's int-sized
 * ncclDataType_t / ncclRedOp_t enum values (not declared here).
 */
#ifndef RESILIENT_NCCL_COLLNET_V6_H
#define RESILIENT_NCCL_COLLNET_V6_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/net_v6.h"
#include "nccl/result.h"

typedef struct {
  const char* name; /* data member */
  ncclResult_t (*init)(ncclDebugLogger_t logFn); /* once per process */
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* handles: each rank's listen handle (nranks entries); blocking, once. */
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  ncclResult_t (*reduceSupport)(int dataType, int redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, int size, int type, void** mhandle);
  /* Not NULL-checked by NCCL when ptrSupport has NCCL_PTR_DMABUF. */
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             int dataType, int redOp, void* sendMhandle, void* recvMhandle,
                             void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v6_t;

NCCL_ABI_SIZE(ncclCollNet_v6_t, 120);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, name, 0);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, init, 8);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, devices, 16);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, getProperties, 24);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, listen, 32);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, connect, 40);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, reduceSupport, 48);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, regMr, 56);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, regMrDmaBuf, 64);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, deregMr, 72);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, iallreduce, 80);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, iflush, 88);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, test, 96);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, closeColl, 104);
NCCL_ABI_OFFSET(ncclCollNet_v6_t, closeListen, 112);

#endif /* RESILIENT_NCCL_COLLNET_V6_H */
