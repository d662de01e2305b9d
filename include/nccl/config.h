/*
 * nccl-resilient: ncclConfig_t as laid out by NCCL 2.28.9 (docs/reference/nccl-abi.md §3.5;
 * 80 bytes). This is a public-API struct, not a plugin one: the restart
 * library fills it when it drives NCCL through dlopen (ncclCommInitRankConfig,
 * ncclCommSplit, ncclCommShrink) without including NCCL's nccl.h. Fields
 * after the ones docs/reference/nccl-abi.md places are consecutive ints/pointers; all
 * offsets are asserted below.
 */
#ifndef RESILIENT_NCCL_CONFIG_H
#define RESILIENT_NCCL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"

/* Value of ncclConfig_t.magic (our name). */
#define NCCL_CONFIG_MAGIC_VALUE 0xcafebeef

/* INT_MIN, the "not set" value of an int field (our name; docs/reference/nccl-abi.md
 * states it for trafficClass, which NCCL then hands the plugin as -1). */
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)

typedef struct {
  size_t size;          /* sizeof(ncclConfig_t) */
  unsigned int magic;   /* NCCL_CONFIG_MAGIC_VALUE */
  unsigned int version; /* NCCL version code the caller's layout comes from */
  int blocking;         /* 0 = non-blocking communicator (calls may return ncclInProgress) */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;  /* selects the net plugin by its name; NCCL_NET overrides it */
  int splitShare;       /* children of split share the parent's resources and net ctx */
  int trafficClass;     /* to the plugin as ncclNetCommConfig.trafficClass (unset -> -1) */
  const char* commName; /* may be NULL; given to the profiler */
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare; /* children of shrink share resources (not with SHRINK_ABORT) */
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

NCCL_ABI_SIZE(ncclConfig_t, 80);
NCCL_ABI_OFFSET(ncclConfig_t, size, 0);
NCCL_ABI_OFFSET(ncclConfig_t, magic, 8);
NCCL_ABI_OFFSET(ncclConfig_t, version, 12);
NCCL_ABI_OFFSET(ncclConfig_t, blocking, 16);
NCCL_ABI_OFFSET(ncclConfig_t, cgaClusterSize, 20);
NCCL_ABI_OFFSET(ncclConfig_t, minCTAs, 24);
NCCL_ABI_OFFSET(ncclConfig_t, maxCTAs, 28);
NCCL_ABI_OFFSET(ncclConfig_t, netName, 32);
NCCL_ABI_OFFSET(ncclConfig_t, splitShare, 40);
NCCL_ABI_OFFSET(ncclConfig_t, trafficClass, 44);
NCCL_ABI_OFFSET(ncclConfig_t, commName, 48);
NCCL_ABI_OFFSET(ncclConfig_t, collnetEnable, 56);
NCCL_ABI_OFFSET(ncclConfig_t, CTAPolicy, 60);
NCCL_ABI_OFFSET(ncclConfig_t, shrinkShare, 64);
NCCL_ABI_OFFSET(ncclConfig_t, nvlsCTAs, 68);
NCCL_ABI_OFFSET(ncclConfig_t, nChannelsPerNetPeer, 72);
NCCL_ABI_OFFSET(ncclConfig_t, nvlinkCentricSched, 76);

#endif /* RESILIENT_NCCL_CONFIG_H */
