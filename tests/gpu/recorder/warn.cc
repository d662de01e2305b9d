#include "tests/gpu/recorder/warn.h"

#include <cstdarg>
#include <cstdio>

namespace resilient::recorder {

void warn(ncclDebugLogger_t logger, unsigned long subsys, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (logger != nullptr) {
    logger(NCCL_LOG_WARN, subsys, "nccl-resilient-recorder", __LINE__, "%s", text);
  } else {
    std::fprintf(stderr, "nccl-resilient recorder: %s\n", text);
  }
}

}  // namespace resilient::recorder
