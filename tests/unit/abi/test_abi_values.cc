// Values of the ABI declarations (the sizes and offsets are checked by the
// headers themselves with static_assert), and, where NCCL's public nccl.h is
// installed at build time, a cross-check of what it declares against ours.
#include <catch2/catch.hpp>

#include "nccl/collnet_v11.h"
#include "nccl/config.h"
#include "nccl/log.h"
#include "nccl/net_common.h"
#include "nccl/net_profiler.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "nccl/profiler_common.h"
#include "nccl/profiler_v1.h"
#include "nccl/profiler_v2.h"
#include "nccl/profiler_v3.h"
#include "nccl/profiler_v4.h"
#include "nccl/profiler_v5.h"
#include "nccl/result.h"
#include "tests/unit/abi/public_nccl_layout.h"

TEST_CASE("all ABI headers coexist in one C++ translation unit", "[abi]") {
  STATIC_REQUIRE(sizeof(ncclNet_v11_t) == 22 * sizeof(void*));
  STATIC_REQUIRE(sizeof(ncclProfiler_v5_t) == 6 * sizeof(void*));
}

TEST_CASE("constants have docs/reference/nccl-abi.md's values", "[abi]") {
  STATIC_REQUIRE(NCCL_NET_HANDLE_MAXSIZE == 128);
  STATIC_REQUIRE(NCCL_NET_MAX_REQUESTS == 32);
  STATIC_REQUIRE(NCCL_PTR_HOST == 0x1);
  STATIC_REQUIRE(NCCL_PTR_CUDA == 0x2);
  STATIC_REQUIRE(NCCL_PTR_DMABUF == 0x4);
  STATIC_REQUIRE(NCCL_NET_OPTIONAL_RECV_COMPLETION == 0x1);
  STATIC_REQUIRE(NCCL_MAX_NET_SIZE_BYTES == 1099511627776ull);
  STATIC_REQUIRE(NCCL_NET_MAX_DEVS_PER_NIC == 4);
  STATIC_REQUIRE(NCCL_NET_DEVICE_HOST == 0);
  STATIC_REQUIRE(NCCL_NET_DEVICE_UNPACK_VERSION == 7);
  STATIC_REQUIRE(NCCL_PROFILER_NET_TYPE_IB == 0x10000);
  STATIC_REQUIRE(NCCL_PROFILER_NET_TYPE_SOCK == 0x20000);
  STATIC_REQUIRE(NCCL_PROFILER_NET_TYPE_RESILIENT == 0x30000);
}

TEST_CASE("result codes and log levels have NCCL's values", "[abi]") {
  STATIC_REQUIRE(ncclSuccess == 0);
  STATIC_REQUIRE(ncclSystemError == 2);
  STATIC_REQUIRE(ncclInternalError == 3);
  STATIC_REQUIRE(ncclInvalidUsage == 5);
  STATIC_REQUIRE(ncclRemoteError == 6);
  STATIC_REQUIRE(ncclInProgress == 7);
  STATIC_REQUIRE(NCCL_LOG_WARN == 2);
  STATIC_REQUIRE(NCCL_LOG_TRACE == 5);
  STATIC_REQUIRE(NCCL_NET == 0x10);
  STATIC_REQUIRE(NCCL_PROFILE == 0x4000);
  STATIC_REQUIRE(NCCL_RAS == 0x8000);
}

TEST_CASE("profiler event bits and states have NCCL's values", "[abi]") {
  STATIC_REQUIRE(ncclProfileColl == 1 << 1);
  STATIC_REQUIRE(ncclProfileProxyStep == 1 << 4);
  STATIC_REQUIRE(ncclProfileKernelCh == 1 << 6);
  STATIC_REQUIRE(ncclProfileNetPlugin == 1 << 7);
  STATIC_REQUIRE(ncclProfileKernelLaunch == 1 << 11);
  STATIC_REQUIRE(ncclProfilerProxyStepSendGPUWait == 8);
  STATIC_REQUIRE(ncclProfilerProxyStepRecvGPUWait == 12);
  STATIC_REQUIRE(ncclProfilerProxyCtrlAppendEnd == 18);
  STATIC_REQUIRE(ncclProfilerNetPluginUpdate == 21);
  STATIC_REQUIRE(ncclProfilerKernelChStop == 22);
  STATIC_REQUIRE(ncclProfilerGroupEndApiStart == 24);
}

#if RESILIENT_HAVE_NCCL_H
TEST_CASE("our declarations agree with the installed nccl.h", "[abi][nccl-h]") {
  const resilient::test::PublicNcclLayout installed = resilient::test::installedNcclLayout();
  CHECK(installed.resultValues[0] == ncclSuccess);
  CHECK(installed.resultValues[1] == ncclUnhandledCudaError);
  CHECK(installed.resultValues[2] == ncclSystemError);
  CHECK(installed.resultValues[3] == ncclInternalError);
  CHECK(installed.resultValues[4] == ncclInvalidArgument);
  CHECK(installed.resultValues[5] == ncclInvalidUsage);
  CHECK(installed.resultValues[6] == ncclRemoteError);
  CHECK(installed.resultValues[7] == ncclInProgress);
  CHECK(installed.resultValues[8] == ncclNumResults);
  CHECK(installed.configSize == sizeof(ncclConfig_t));
  CHECK(installed.configMagic == NCCL_CONFIG_MAGIC_VALUE);
  CHECK(installed.configOffsets.netName == offsetof(ncclConfig_t, netName));
  CHECK(installed.configOffsets.trafficClass == offsetof(ncclConfig_t, trafficClass));
  CHECK(installed.configOffsets.commName == offsetof(ncclConfig_t, commName));
  CHECK(installed.configOffsets.shrinkShare == offsetof(ncclConfig_t, shrinkShare));
  CHECK(installed.configOffsets.nvlinkCentricSched == offsetof(ncclConfig_t, nvlinkCentricSched));
}
#endif  // RESILIENT_HAVE_NCCL_H
