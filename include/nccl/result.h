/*
 * nccl-resilient: ncclResult_t, the return code of every plugin call
 * (docs/reference/nccl-abi.md §1.2). Our own declaration; do not mix with NCCL's nccl.h in
 * one translation unit.
 */
#ifndef RESILIENT_NCCL_RESULT_H
#define RESILIENT_NCCL_RESULT_H

#include "nccl/abi_check.h"

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,     /* OS or network failure */
  ncclInternalError = 3,   /* misuse by NCCL, or our own bug */
  ncclInvalidArgument = 4, /* plugins should not normally return it */
  ncclInvalidUsage = 5,    /* user or configuration error */
  ncclRemoteError = 6,     /* "remote process exited or there was a network error" */
  ncclInProgress = 7,      /* NCCL treats it as success: a plugin never returns it */
  ncclNumResults = 8       /* sentinel */
} ncclResult_t;

NCCL_ABI_SIZE(ncclResult_t, 4);

#endif /* RESILIENT_NCCL_RESULT_H */
