// The logger the host engine hands to a net plugin's init, as NCCL does. It
// forwards the plugin's messages to our log facade and keeps the plugin's
// last WARN, which is what NCCL would return from ncclGetLastError(): the
// resilient plugin's WARN names the fault class and the peer it blamed.
#pragma once

#include <cstdint>
#include <string>

#include "nccl/log.h"

namespace resilient::hostengine {

ncclDebugLogger_t pluginLogger() noexcept;

struct PluginWarning {
  uint64_t sequence = 0;  // 0: none yet; grows with every WARN
  std::string text;
};

// The plugin's latest WARN (thread-safe: plugins log from their own threads).
PluginWarning lastPluginWarning();

}  // namespace resilient::hostengine
