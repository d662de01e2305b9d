/*
 * nccl-resilient: the part of NCCL's public host API the restart library
 * calls through dlopen (docs/reference/nccl-abi.md §3; NCCL's user guide): the communicator
 * handle, the unique id, the version code and the function types of the
 * symbols it looks up. Our own declarations, written from those facts;
 * never mix them with NCCL's nccl.h in one translation unit (the layout
 * test compiles ours inside a namespace next to it).
 */
#ifndef RESILIENT_NCCL_API_H
#define RESILIENT_NCCL_API_H

#include <stddef.h>

#include "nccl/abi_check.h"
#include "nccl/config.h"
#include "nccl/result.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque communicator; NCCL's ncclComm_t is the same pointer type. */
struct ncclComm;
typedef struct ncclComm* ncclComm_t;

/* Bytes of the id rank 0 creates and every rank passes to init. */
#define NCCL_UNIQUE_ID_BYTES 128

/* Passed by value to ncclCommInitRankConfig. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

NCCL_ABI_SIZE(ncclUniqueId, 128);

/* ncclGetVersion's code: major*1000 + minor*100 + patch up to 2.8,
 * major*10000 + minor*100 + patch from 2.9 on (2.28.9 -> 22809). */
#define NCCL_API_VERSION_CODE(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* ncclCommShrink flags (2.27): build the child normally, or first stop the
 * parent's in-flight work (its resources are then never shared). */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
/* ncclCommRevoke flags (2.28.7): must be 0. */
#define NCCL_REVOKE_DEFAULT 0x00

/* The functions, as pointer types for dlsym. */
typedef ncclResult_t (*ncclGetVersion_fn)(int* version);
typedef ncclResult_t (*ncclGetUniqueId_fn)(ncclUniqueId* uniqueId);
typedef ncclResult_t (*ncclCommInitRankConfig_fn)(ncclComm_t* comm, int nranks,
                                                  ncclUniqueId commId, int rank,
                                                  ncclConfig_t* config);
typedef ncclResult_t (*ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t* asyncError);
typedef ncclResult_t (*ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommRevoke_fn)(ncclComm_t comm, int revokeFlags);
typedef ncclResult_t (*ncclCommShrink_fn)(ncclComm_t comm, int* excludeRanksList,
                                          int excludeRanksCount, ncclComm_t* newcomm,
                                          ncclConfig_t* config, int shrinkFlags);
/* 2.29: an id for the new ranks of a grow (from the existing root), and the
 * grow itself: existing ranks pass their communicator and rank -1 (the root
 * also the id, the others NULL); new ranks pass NULL, the id and their rank
 * (after the existing ones). */
typedef ncclResult_t (*ncclCommGetUniqueId_fn)(ncclComm_t comm, ncclUniqueId* uniqueId);
typedef ncclResult_t (*ncclCommGrow_fn)(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                        int rank, ncclComm_t* newcomm, ncclConfig_t* config);
typedef ncclResult_t (*ncclCommFinalize_fn)(ncclComm_t comm);
/* Ends this thread's group (ncclInvalidUsage outside any group). */
typedef ncclResult_t (*ncclGroupEnd_fn)(void);
typedef const char* (*ncclGetErrorString_fn)(ncclResult_t result);
typedef const char* (*ncclGetLastError_fn)(ncclComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_NCCL_API_H */
