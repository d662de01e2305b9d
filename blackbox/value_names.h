// The one name of each value the plugins record in the blackbox
// (include/resilient/blackbox.h) that people read: fault classes
// (RESILIENT_BLACKBOX_FAULT_*: what the net plugin's WARN starts with, what
// resilient-inspect and its JSON print, what the restart library's fault
// records say) and proxy-step states (the profiler's hang reports, the
// flight recorder in resilient-inspect).
#pragma once

#include <cstdint>

namespace resilient::blackbox {

// "peer process exited", "link down", ...; "unknown fault" for a value no
// version of the layout defines.
const char* faultClassName(uint32_t faultClass) noexcept;

// The proxy-step state NCCL last reported for an operation (the
// ncclProfilerProxyStep* values of the profiler ABI): "RecvWait", ...;
// "none" for 0 (no step seen), "other" for the states we do not name.
const char* stepStateName(uint32_t state) noexcept;

}  // namespace resilient::blackbox
