// Our NCCL API declarations (include/nccl/api.h, config.h, result.h)
// against the installed nccl.h, at compile time. Built only where the build
// finds nccl.h. Ours are compiled inside a namespace so that both sets of
// names can live in one translation unit.
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

namespace ours {
#include "nccl/api.h"
}  // namespace ours

constexpr int kOurIdBytes = NCCL_UNIQUE_ID_BYTES;
constexpr int kOurShrinkAbort = NCCL_SHRINK_ABORT;
constexpr int kOurShrinkDefault = NCCL_SHRINK_DEFAULT;
constexpr int kOurRevokeDefault = NCCL_REVOKE_DEFAULT;
constexpr int kOurUndefInt = NCCL_CONFIG_UNDEF_INT;

// Macros both define (ours with the same values, NCCL's spelled its way).
#undef NCCL_UNIQUE_ID_BYTES
#undef NCCL_SHRINK_DEFAULT
#undef NCCL_SHRINK_ABORT
#undef NCCL_REVOKE_DEFAULT
#undef NCCL_CONFIG_UNDEF_INT

#include <nccl.h>

#include <catch2/catch.hpp>

#define SAME_OFFSET(member) \
  static_assert(offsetof(ours::ncclConfig_t, member) == offsetof(ncclConfig_t, member), #member)

static_assert(sizeof(ours::ncclUniqueId) == sizeof(ncclUniqueId));
static_assert(alignof(ours::ncclUniqueId) == alignof(ncclUniqueId));
static_assert(kOurIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(kOurShrinkAbort == NCCL_SHRINK_ABORT);
static_assert(kOurShrinkDefault == NCCL_SHRINK_DEFAULT);
static_assert(kOurRevokeDefault == NCCL_REVOKE_DEFAULT);
static_assert(kOurUndefInt == NCCL_CONFIG_UNDEF_INT);
static_assert(sizeof(ours::ncclConfig_t) == sizeof(ncclConfig_t));
SAME_OFFSET(size);
SAME_OFFSET(magic);
SAME_OFFSET(version);
SAME_OFFSET(blocking);
SAME_OFFSET(cgaClusterSize);
SAME_OFFSET(minCTAs);
SAME_OFFSET(maxCTAs);
SAME_OFFSET(netName);
SAME_OFFSET(splitShare);
SAME_OFFSET(trafficClass);
SAME_OFFSET(commName);
SAME_OFFSET(collnetEnable);
SAME_OFFSET(CTAPolicy);
SAME_OFFSET(shrinkShare);
SAME_OFFSET(nvlsCTAs);
SAME_OFFSET(nChannelsPerNetPeer);
SAME_OFFSET(nvlinkCentricSched);
static_assert(static_cast<int>(ours::ncclInProgress) == static_cast<int>(ncclInProgress));
static_assert(static_cast<int>(ours::ncclRemoteError) == static_cast<int>(ncclRemoteError));
static_assert(static_cast<int>(ours::ncclUnhandledCudaError) ==
              static_cast<int>(ncclUnhandledCudaError));
static_assert(sizeof(ours::ncclResult_t) == sizeof(ncclResult_t));
static_assert(NCCL_API_VERSION_CODE(2, 28, 9) == NCCL_VERSION(2, 28, 9));
static_assert(NCCL_API_VERSION_CODE(2, 8, 4) == NCCL_VERSION(2, 8, 4));
static_assert(NCCL_API_VERSION_CODE(3, 0, 1) == NCCL_VERSION(3, 0, 1));

// NCCL's prototypes have the shapes of our function-pointer types (each
// argument written with NCCL's type where ours has the same-named one).
static_assert(std::is_same_v<decltype(&::ncclGetVersion), ncclResult_t (*)(int*)>);
static_assert(std::is_same_v<decltype(&::ncclGetUniqueId), ncclResult_t (*)(ncclUniqueId*)>);
static_assert(std::is_same_v<decltype(&::ncclCommInitRankConfig),
                             ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)>);
static_assert(std::is_same_v<decltype(&::ncclCommGetAsyncError),
                             ncclResult_t (*)(ncclComm_t, ncclResult_t*)>);
static_assert(std::is_same_v<decltype(&::ncclCommAbort), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&::ncclCommRevoke), ncclResult_t (*)(ncclComm_t, int)>);
static_assert(std::is_same_v<decltype(&::ncclCommShrink),
                             ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*,
                                              int)>);
static_assert(std::is_same_v<decltype(&::ncclCommFinalize), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&::ncclCommDestroy), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&::ncclGetErrorString), const char* (*)(ncclResult_t)>);
static_assert(std::is_same_v<decltype(&::ncclGetLastError), const char* (*)(ncclComm_t)>);
static_assert(std::is_same_v<ours::ncclComm_t, ours::ncclComm*> &&
              std::is_same_v<ncclComm_t, ::ncclComm*>);

TEST_CASE("our NCCL API declarations match the installed nccl.h", "[nccl-layout]") {
  ncclConfig_t theirs = NCCL_CONFIG_INITIALIZER;
  REQUIRE(theirs.magic == NCCL_CONFIG_MAGIC_VALUE);
  REQUIRE(theirs.blocking == INT_MIN);
  REQUIRE(theirs.size == sizeof(ours::ncclConfig_t));
}
