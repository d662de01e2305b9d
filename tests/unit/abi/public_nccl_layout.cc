// Built only when the build finds NCCL's public nccl.h.
#include "tests/unit/abi/public_nccl_layout.h"

#include <nccl.h>

namespace resilient::test {

PublicNcclLayout installedNcclLayout() {
  PublicNcclLayout out;
  const ncclResult_t results[9] = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
                                   ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
                                   ncclRemoteError,   ncclInProgress,         ncclNumResults};
  for (int i = 0; i < 9; ++i) {
    out.resultValues[i] = static_cast<int>(results[i]);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  out.configSize = sizeof(ncclConfig_t);
  out.configMagic = config.magic;
  out.configOffsets.netName = offsetof(ncclConfig_t, netName);
  out.configOffsets.trafficClass = offsetof(ncclConfig_t, trafficClass);
  out.configOffsets.commName = offsetof(ncclConfig_t, commName);
  out.configOffsets.shrinkShare = offsetof(ncclConfig_t, shrinkShare);
  out.configOffsets.nvlinkCentricSched = offsetof(ncclConfig_t, nvlinkCentricSched);
  return out;
}

}  // namespace resilient::test
