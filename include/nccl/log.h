/*
 * nccl-resilient: NCCL's debug logger handed to plugins at init (docs/reference/nccl-abi.md
 * §1.2): levels, subsystem flags and the logger function type.
 */
#ifndef RESILIENT_NCCL_LOG_H
#define RESILIENT_NCCL_LOG_H

#include "nccl/abi_check.h"

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2, /* a WARN through the logger also becomes ncclGetLastError() */
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

NCCL_ABI_SIZE(ncclDebugLogLevel, 4);

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* void fn(level, flags, file_or_func, line, fmt, ...): thread-safe inside NCCL. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char* file_or_func, int line, const char* fmt, ...);

#endif /* RESILIENT_NCCL_LOG_H */
