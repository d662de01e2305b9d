#include "common/boundary.h"

#include "common/log.h"

namespace resilient::boundary {

ncclResult_t reportException(const char* entry, const char* what, ncclResult_t code) noexcept {
  RES_WARN(~0ul, "%s: unexpected exception: %s; returning error %d to NCCL", entry, what,
           static_cast<int>(code));
  return code;
}

ncclResult_t reportInProgress(const char* entry) noexcept {
  RES_WARN(~0ul,
           "%s: internal bug: the call returned ncclInProgress, which NCCL takes for success; "
           "returning ncclInternalError",
           entry);
  return ncclInternalError;
}

}  // namespace resilient::boundary
