// Values of the ABI declarations (the sizes and offsets are checked by the
// headers themselves with static_assert), and, where NCCL's public nccl.h is
// installed at build time, a cross-check of what it declares against ours.
#include <cstring>

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
#include "nccl/profiler_v6.h"
#include "nccl/profiler_v7.h"
#include "nccl/result.h"
#include "tests/unit/abi/public_nccl_layout.h"

TEST_CASE("all ABI headers coexist in one C++ translation unit", "[abi]") {
  STATIC_REQUIRE(sizeof(ncclNet_v11_t) == 22 * sizeof(void*));
  STATIC_REQUIRE(sizeof(ncclProfiler_v5_t) == 6 * sizeof(void*));
  STATIC_REQUIRE(sizeof(ncclProfiler_v7_t) == 6 * sizeof(void*));
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
  // v6, v7 (docs/reference/nccl-2.31-plugins.md §1.4, §1.5).
  STATIC_REQUIRE(ncclProfileCeColl == 1 << 12);
  STATIC_REQUIRE(ncclProfileCeBatch == 1 << 14);
  STATIC_REQUIRE(ncclProfileKernelPhase == 1 << 15);
  STATIC_REQUIRE(ncclProfilerCeCollStart == 25);
  STATIC_REQUIRE(ncclProfilerCeBatchComplete == 30);
  STATIC_REQUIRE(ncclProfilerKernelPhaseStop == 31);
}

TEST_CASE("profiler v7's descriptor: v6's members as prefixes, the new members at the end",
          "[abi]") {
  // docs/reference/nccl-2.31-plugins.md §1.2: 136 bytes (coll is the largest member).
  STATIC_REQUIRE(sizeof(ncclProfilerEventDescr_v7_t) == 136);
  STATIC_REQUIRE(sizeof(ncclProfilerEventDescr_v6_t) == 112);
  STATIC_REQUIRE(sizeof(ncclProfilerEventStateArgs_v7_t) == 8);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, coll.userTag) == 128);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, coll.isSymColl) == 120);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, coll.kernelVariant) == 112);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, collApi.userTag) == 72);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, p2pApi.userTag) == 64);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, p2p.userTag) == 72);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, ceColl.userTag) == 112);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, kernelPhase.phaseId) == 25);
  STATIC_REQUIRE(offsetof(ncclProfilerEventDescr_v7_t, kernelPhase.pTimer) == 40);
  // A v7 descriptor read through the v6 layout (what NCCL's own v6 adapter
  // relies on) sees the same coll members.
  ncclProfilerEventDescr_v7_t v7{};
  v7.type = ncclProfileColl;
  v7.coll.seqNumber = 41;
  v7.coll.nChannels = 3;
  v7.coll.parentGroup = &v7;
  v7.coll.userTag = 0x5eed;
  ncclProfilerEventDescr_v6_t v6{};
  std::memcpy(&v6, &v7, sizeof v6);
  CHECK(v6.coll.seqNumber == 41);
  CHECK(v6.coll.nChannels == 3);
  CHECK(v6.coll.parentGroup == &v7);
  uint64_t tag = 0;
  std::memcpy(&tag, reinterpret_cast<const char*>(&v7) + 128, sizeof tag);
  CHECK(tag == 0x5eed);
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
