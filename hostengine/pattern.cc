#include "hostengine/pattern.h"

namespace resilient::hostengine {

const char* patternName(Pattern pattern) noexcept {
  switch (pattern) {
    case Pattern::kPingPong: return "pingpong";
    case Pattern::kSendRecv: return "sendrecv";
    case Pattern::kAllReduce: return "allreduce";
    case Pattern::kAllToAll: return "alltoall";
  }
  return "unknown";
}

std::optional<Pattern> parsePattern(std::string_view name) noexcept {
  for (Pattern p :
       {Pattern::kPingPong, Pattern::kSendRecv, Pattern::kAllReduce, Pattern::kAllToAll}) {
    if (name == patternName(p)) {
      return p;
    }
  }
  return std::nullopt;
}

double busFactor(Pattern pattern, int nranks) noexcept {
  if (nranks < 1) {
    return 0;
  }
  const double n = nranks;
  switch (pattern) {
    case Pattern::kAllReduce: return 2 * (n - 1) / n;
    case Pattern::kAllToAll: return (n - 1) / n;
    case Pattern::kPingPong:
    case Pattern::kSendRecv: return 1;
  }
  return 0;
}

size_t elementBytes(Pattern pattern) noexcept {
  return pattern == Pattern::kAllReduce ? sizeof(float) : 1;
}

const char* elementType(Pattern pattern) noexcept {
  return pattern == Pattern::kAllReduce ? "float" : "uint8";
}

size_t effectiveBytes(Pattern pattern, int nranks, size_t bytes) noexcept {
  switch (pattern) {
    case Pattern::kAllReduce: return bytes / sizeof(float) * sizeof(float);
    case Pattern::kAllToAll:
      return nranks > 0 ? bytes / static_cast<size_t>(nranks) * static_cast<size_t>(nranks) : 0;
    case Pattern::kPingPong:
    case Pattern::kSendRecv: return bytes;
  }
  return bytes;
}

size_t elementCount(Pattern pattern, int nranks, size_t bytes) noexcept {
  return effectiveBytes(pattern, nranks, bytes) / elementBytes(pattern);
}

}  // namespace resilient::hostengine
