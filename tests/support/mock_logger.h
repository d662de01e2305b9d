// A stand-in for NCCL's logger: captures every call (level, flags, formatted
// text) so tests can assert what a plugin would have logged through NCCL.
// Install with CapturingLogger; it hands itself to log::setNcclLogger and
// restores stderr logging and the previous level when destroyed.
#pragma once

#include <string>
#include <vector>

#include "nccl/log.h"
#include "common/log.h"

namespace resilient::test {

struct LoggedMessage {
  ncclDebugLogLevel level = NCCL_LOG_NONE;
  unsigned long flags = 0;
  std::string text;
};

class CapturingLogger {
 public:
  explicit CapturingLogger(log::Level level = log::Level::kTrace, unsigned long mask = ~0ul);
  ~CapturingLogger();
  CapturingLogger(const CapturingLogger&) = delete;
  CapturingLogger& operator=(const CapturingLogger&) = delete;

  std::vector<LoggedMessage> messages() const;
  // Messages of `level` whose text contains `needle`.
  size_t count(ncclDebugLogLevel level, const std::string& needle = "") const;

  static ncclDebugLogger_t function();

 private:
  log::Level savedLevel_;
  unsigned long savedMask_;
};

}  // namespace resilient::test
