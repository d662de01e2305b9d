// How both recorder plugins warn: through the logger NCCL handed to init,
// else on stderr.
#pragma once

#include "nccl/log.h"

namespace resilient::recorder {

// One WARN for the subsystems `subsys` (NCCL_NET, NCCL_INIT, ...).
__attribute__((format(printf, 3, 4))) void warn(ncclDebugLogger_t logger, unsigned long subsys,
                                                const char* fmt, ...);

}  // namespace resilient::recorder
