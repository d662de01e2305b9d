// The one name of each fault class a plugin records in the blackbox
// (RESILIENT_BLACKBOX_FAULT_*, include/resilient/blackbox.h): what the net
// plugin's WARN starts with, what resilient-inspect and its JSON print, and
// what the restart library's fault records say.
#pragma once

#include <cstdint>

namespace resilient::blackbox {

// "peer process exited", "link down", ...; "unknown fault" for a value no
// version of the layout defines.
const char* faultClassName(uint32_t faultClass) noexcept;

}  // namespace resilient::blackbox
