/*
 * nccl-resilient: types and constants shared by every net-plugin version
 * (docs/reference/nccl-abi.md §1.2 and §1.4): handle/request limits, pointer-type bits,
 * the device-offload handle, virtual-device props, per-communicator config
 * and "app-aware" attributes, collnet SGEs, the attr bitmask bit numbers,
 * and the profiler callback NCCL hands to net plugins (semantics in §1.10).
 */
#ifndef RESILIENT_NCCL_NET_COMMON_H
#define RESILIENT_NCCL_NET_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/abi_check.h"
#include "nccl/result.h"

/* ---- Limits ------------------------------------------------------------ */

/* Bytes of the opaque listen->connect handle buffer NCCL provides and
 * exchanges through bootstrap; listen() fills at most this many. */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Outstanding requests per send/recv comm. The sender side must allow
 * NCCL_NET_MAX_REQUESTS * maxRecvs. v6 plugins used the smaller value. */
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_REQUESTS_V6 8

/* Value to put in maxP2pBytes and maxCollBytes (v9+): 1 TiB. */
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40) /* 1099511627776 */

/* Transfer limits NCCL assumes for v8-and-older plugins (our names). */
#define NCCL_NET_LEGACY_MAX_SIZE (1ULL << 30)     /* 1 GiB, net */
#define NCCL_COLLNET_LEGACY_MAX_SIZE (1ULL << 29) /* 512 MiB, collnet */

/* Size of vProps.devs[] in v9..v11; v12 (NCCL 2.30) fuses up to 8 NICs. */
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8

/* railId / planeId of a v12 device not on a known rail or plane. */
#define NCCL_NET_ID_UNDEF (-1)

/* Net plugins NCCL keeps, including its 2 internal ones (IB, Socket). */
#define NCCL_NET_MAX_PLUGINS 16

/* Upper bound of the n argument of irecv (= NCCL's MAXCHANNELS). */
#define NCCL_PROXY_MAX_SUBS 64

/* Proxy ring depth per connection. */
#define NCCL_STEPS 8

/* ---- Pointer types: ptrSupport bits and the regMr type argument --------- */

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* ---- Request sentinels and flags ---------------------------------------- */

/* NCCL may pre-store (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION in irecv's
 * *request ("completion may be reported early"); the plugin must always
 * overwrite it with a real request or NULL. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* Defined by NCCL; unused by the 2.28.9 core. */
#define NCCL_NET_MULTI_REQUEST 0x2

/* ---- "Undefined" markers ------------------------------------------------ */

/* ncclNetCommConfig.trafficClass when the user set none. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)
/* ncclNetAttr op/algo/proto when undefined: reads as (uint32_t)-1. */
#define NCCL_NET_ATTR_UNDEF (-1)

/* ---- GIN-only flags (not used by net plugins) --------------------------- */

#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

/* ---- Device offload ------------------------------------------------------ */

/* Version to report with NCCL_NET_DEVICE_HOST. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0
/* Version NCCL accepts with NCCL_NET_DEVICE_UNPACK. */
#define NCCL_NET_DEVICE_UNPACK_VERSION 7

#define NCCL_NET_MTU_SIZE 4096

/* props.netDeviceType. NCCL accepts only HOST, or UNPACK with version 7,
 * from getProperties(0). A plain host plugin reports HOST. */
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

NCCL_ABI_SIZE(ncclNetDeviceType, 4);

/* Out-param of connect/accept (v7+) for device offload. NCCL sets *DH = NULL
 * for host plugins, and the DH pointer itself may be NULL (GDR probe); a
 * non-NULL *DH means offload was requested. Same type in v7..v11. */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

NCCL_ABI_SIZE(ncclNetDeviceHandle_v7_t, 32);
NCCL_ABI_OFFSET(ncclNetDeviceHandle_v7_t, netDeviceType, 0);
NCCL_ABI_OFFSET(ncclNetDeviceHandle_v7_t, netDeviceVersion, 4);
NCCL_ABI_OFFSET(ncclNetDeviceHandle_v7_t, handle, 8);
NCCL_ABI_OFFSET(ncclNetDeviceHandle_v7_t, size, 16);
NCCL_ABI_OFFSET(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

/* ---- Virtual (fused) NIC properties, v9..v11 ---------------------------- */

/* Normally ndevs = 1, devs[0] = dev. Also the input of makeVDevice. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

NCCL_ABI_SIZE(ncclNetVDeviceProps_v9_t, 20);
NCCL_ABI_OFFSET(ncclNetVDeviceProps_v9_t, ndevs, 0);
NCCL_ABI_OFFSET(ncclNetVDeviceProps_v9_t, devs, 4);

typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v11_t;

/* v12: the same with room for 8 fused devices. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

NCCL_ABI_SIZE(ncclNetVDeviceProps_v12_t, 36);
NCCL_ABI_OFFSET(ncclNetVDeviceProps_v12_t, ndevs, 0);
NCCL_ABI_OFFSET(ncclNetVDeviceProps_v12_t, devs, 4);

/* ---- Per-communicator config, v10 (connect) / v11 (init) ---------------- */

/* trafficClass: QoS class; NCCL_NET_TRAFFIC_CLASS_UNDEF (-1) when the
 * user's ncclConfig_t.trafficClass is undefined. */
typedef struct {
  int trafficClass;
} ncclNetCommConfig_v10_t;

NCCL_ABI_SIZE(ncclNetCommConfig_v10_t, 4);
NCCL_ABI_OFFSET(ncclNetCommConfig_v10_t, trafficClass, 0);

typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v12_t;

/* ---- "App-aware" hints given to setNetAttr (v11) ------------------------ */

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

NCCL_ABI_SIZE(ncclNetCommAttr_v11_t, 16);
NCCL_ABI_OFFSET(ncclNetCommAttr_v11_t, maxConcurrentPeers, 0);
NCCL_ABI_OFFSET(ncclNetCommAttr_v11_t, minConcurrentPeers, 4);
NCCL_ABI_OFFSET(ncclNetCommAttr_v11_t, maxFlowsPerPeer, 8);
NCCL_ABI_OFFSET(ncclNetCommAttr_v11_t, minFlowsPerPeer, 12);

/* op, algo, proto: bitmasks of NCCL_NET_ATTR_BIT(x) with x from
 * ncclNetAttrFunc, ncclNetAttrAlgo, ncclNetAttrProto respectively; each is
 * (uint32_t)NCCL_NET_ATTR_UNDEF when undefined. */
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

NCCL_ABI_SIZE(ncclNetAttr_v11_t, 44);
NCCL_ABI_OFFSET(ncclNetAttr_v11_t, sendCommAttr, 0);
NCCL_ABI_OFFSET(ncclNetAttr_v11_t, recvCommAttr, 16);
NCCL_ABI_OFFSET(ncclNetAttr_v11_t, op, 32);
NCCL_ABI_OFFSET(ncclNetAttr_v11_t, algo, 36);
NCCL_ABI_OFFSET(ncclNetAttr_v11_t, proto, 40);

/* v12 (NCCL 2.30): unchanged. */
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

/* Bit numbers used in ncclNetAttr_v11_t (our names; NCCL's values). */
#define NCCL_NET_ATTR_BIT(n) (1u << (n))

/* op: NCCL's ncclFunc_t. */
typedef enum {
  ncclNetAttrFuncBroadcast = 0,
  ncclNetAttrFuncReduce = 1,
  ncclNetAttrFuncAllGather = 2,
  ncclNetAttrFuncReduceScatter = 3,
  ncclNetAttrFuncAllReduce = 4,
  ncclNetAttrFuncSendRecv = 5,
  ncclNetAttrFuncSend = 6,
  ncclNetAttrFuncRecv = 7,
  ncclNetAttrFuncAlltoAll = 8,
  ncclNetAttrFuncScatter = 9,
  ncclNetAttrFuncGather = 10
} ncclNetAttrFunc;

/* algo: NCCL's NCCL_ALGO_* numbers. */
typedef enum {
  ncclNetAttrAlgoTree = 0,
  ncclNetAttrAlgoRing = 1,
  ncclNetAttrAlgoCollnetDirect = 2,
  ncclNetAttrAlgoCollnetChain = 3,
  ncclNetAttrAlgoNvls = 4,
  ncclNetAttrAlgoNvlsTree = 5,
  ncclNetAttrAlgoPat = 6
} ncclNetAttrAlgo;

/* proto: NCCL's NCCL_PROTO_* numbers. */
typedef enum {
  ncclNetAttrProtoLL = 0,
  ncclNetAttrProtoLL128 = 1,
  ncclNetAttrProtoSimple = 2
} ncclNetAttrProto;

/* ---- CollNet scatter-gather entries ------------------------------------- */

/* v9..v12: size is size_t. */
typedef struct {
  void* mhandle;
  void* address;
  size_t size;
} ncclNetSGE_v9_t;

NCCL_ABI_SIZE(ncclNetSGE_v9_t, 24);
NCCL_ABI_OFFSET(ncclNetSGE_v9_t, mhandle, 0);
NCCL_ABI_OFFSET(ncclNetSGE_v9_t, address, 8);
NCCL_ABI_OFFSET(ncclNetSGE_v9_t, size, 16);

typedef ncclNetSGE_v9_t ncclNetSGE_v10_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v11_t;
typedef ncclNetSGE_v9_t ncclNetSGE_v12_t;

/* v8: size is uint32_t; the struct keeps pointer alignment (4 bytes of
 * tail padding), so the size is still 24. */
typedef struct {
  void* mhandle;
  void* address;
  uint32_t size;
} ncclNetSGE_v8_t;

NCCL_ABI_SIZE(ncclNetSGE_v8_t, 24);
NCCL_ABI_OFFSET(ncclNetSGE_v8_t, mhandle, 0);
NCCL_ABI_OFFSET(ncclNetSGE_v8_t, address, 8);
NCCL_ABI_OFFSET(ncclNetSGE_v8_t, size, 16);

/* ---- Profiler callback handed to net init (v10+), see §1.10 -------------
 * Start: *eHandle must be NULL on entry (NCCL leaves it untouched when the
 *   profiler's mask lacks NetPlugin); pHandle is the phandle NCCL gave to
 *   isend/irecv, dereferenced without a NULL check, so call only when it is
 *   non-NULL; pluginId and extData are copied into the event descriptor.
 * Stop: (&eh, Stop, NULL, 0, NULL); NCCL stops even a NULL eh, so call only
 *   when eh != NULL.
 * Update: records state NetPluginUpdate with data = extData; UpdateAndStop
 *   does the update and then the stop. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

/* Values of the callback's type argument (our names; NCCL's values). */
typedef enum {
  ncclProfilerNetCallbackStart = 0,
  ncclProfilerNetCallbackStop = 1,
  ncclProfilerNetCallbackUpdate = 2,
  ncclProfilerNetCallbackUpdateAndStop = 3
} ncclProfilerNetCallbackType;

#endif /* RESILIENT_NCCL_NET_COMMON_H */
