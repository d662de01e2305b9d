#include "tests/support/mock_logger.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace resilient::test {
namespace {

std::mutex gMutex;
std::vector<LoggedMessage> gMessages;

void captureLog(ncclDebugLogLevel level, unsigned long flags, const char* /*fileOrFunc*/,
                int /*line*/, const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gMutex);
  gMessages.push_back(LoggedMessage{level, flags, buf});
}

}  // namespace

CapturingLogger::CapturingLogger(log::Level level, unsigned long mask)
    : savedLevel_(log::level()), savedMask_(log::subsystemMask()) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    gMessages.clear();
  }
  log::configure(level, mask);
  log::setNcclLogger(&captureLog);
}

CapturingLogger::~CapturingLogger() {
  log::setNcclLogger(nullptr);
  log::configure(savedLevel_, savedMask_);
}

std::vector<LoggedMessage> CapturingLogger::messages() const {
  std::lock_guard<std::mutex> lock(gMutex);
  return gMessages;
}

size_t CapturingLogger::count(ncclDebugLogLevel level, const std::string& needle) const {
  size_t n = 0;
  for (const LoggedMessage& m : messages()) {
    if (m.level == level && m.text.find(needle) != std::string::npos) {
      ++n;
    }
  }
  return n;
}

ncclDebugLogger_t CapturingLogger::function() {
  return &captureLog;
}

}  // namespace resilient::test
