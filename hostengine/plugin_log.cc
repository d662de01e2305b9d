#include "hostengine/plugin_log.h"

#include <array>
#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "common/log.h"

namespace resilient::hostengine {
namespace {

std::mutex gMutex;
uint64_t gSequence = 0;
std::string gLastWarning;

void logFromPlugin(ncclDebugLogLevel level, unsigned long flags, const char* fileOrFunc, int line,
                   const char* fmt, ...) {
  if (level <= NCCL_LOG_NONE || level > NCCL_LOG_TRACE || fmt == nullptr) {
    return;
  }
  const auto ourLevel = static_cast<log::Level>(level);
  const bool warn = level == NCCL_LOG_WARN;
  if (!warn && !log::enabled(ourLevel, flags)) {
    return;
  }
  std::array<char, 2048> text{};
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text.data(), text.size(), fmt, ap);
  va_end(ap);
  if (warn) {
    const std::lock_guard<std::mutex> lock(gMutex);
    ++gSequence;
    gLastWarning = text.data();
  }
  if (log::enabled(ourLevel, flags)) {
    log::write(ourLevel, flags, fileOrFunc != nullptr ? fileOrFunc : "?", line, "plugin: %s",
               text.data());
  }
}

}  // namespace

ncclDebugLogger_t pluginLogger() noexcept {
  return &logFromPlugin;
}

PluginWarning lastPluginWarning() {
  const std::lock_guard<std::mutex> lock(gMutex);
  return {gSequence, gLastWarning};
}

}  // namespace resilient::hostengine
