#include "tools/harness/report.h"

#include <cctype>
#include <cstdio>
#include <limits>

namespace resilient::harness {
namespace {

Status badSize(std::string_view text, const char* why) {
  return invalidUsage("bad size '" + std::string(text) + "': " + why +
                      " (accepted: a byte count with an optional K, M or G suffix, e.g. 8, "
                      "64K, 1M, 2G)");
}

}  // namespace

Result<size_t> parseSize(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (kMaxSizeBytes - digit) / 10) {
      return badSize(text, "too large (at most 1T)");
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) {
    return badSize(text, "no number");
  }
  std::string_view rest = text.substr(i);
  uint64_t multiplier = 1;
  if (!rest.empty()) {
    switch (std::tolower(static_cast<unsigned char>(rest.front()))) {
      case 'k': multiplier = uint64_t{1} << 10; break;
      case 'm': multiplier = uint64_t{1} << 20; break;
      case 'g': multiplier = uint64_t{1} << 30; break;
      case 't': multiplier = uint64_t{1} << 40; break;
      case 'b': break;
      default: return badSize(text, "unknown suffix");
    }
    if (multiplier != 1) {
      rest.remove_prefix(1);
      if (!rest.empty() && (rest.front() == 'i' || rest.front() == 'I')) {
        rest.remove_prefix(1);
        if (rest.empty()) {
          return badSize(text, "'i' without 'B'");
        }
      }
    }
    if (!rest.empty() && (rest.front() == 'b' || rest.front() == 'B')) {
      rest.remove_prefix(1);
    }
    if (!rest.empty()) {
      return badSize(text, "trailing characters");
    }
  }
  if (value > kMaxSizeBytes / multiplier) {
    return badSize(text, "too large (at most 1T)");
  }
  return static_cast<size_t>(value * multiplier);
}

Result<std::vector<size_t>> sizeSweep(size_t minBytes, size_t maxBytes, uint64_t factor) {
  if (factor < 2) {
    return invalidUsage("size factor must be at least 2, got " + std::to_string(factor));
  }
  if (minBytes > maxBytes) {
    return invalidUsage("minimum size " + std::to_string(minBytes) + " exceeds maximum size " +
                        std::to_string(maxBytes));
  }
  if (maxBytes > kMaxSizeBytes) {
    return invalidUsage("maximum size exceeds 1T");
  }
  std::vector<size_t> sizes;
  size_t size = minBytes;
  while (size <= maxBytes) {
    sizes.push_back(size);
    if (size == 0) {
      size = 1;
      continue;
    }
    if (size > maxBytes / factor) {
      break;
    }
    size *= factor;
  }
  return sizes;
}

SizeResult makeSizeResult(const SizeMeasurement& m) {
  SizeResult r;
  r.bytes = effectiveBytes(m.pattern, m.nranks, m.bytes);
  r.count = elementCount(m.pattern, m.nranks, m.bytes);
  r.timeUs = m.seconds * 1e6;
  r.algBw = m.seconds > 0 ? static_cast<double>(r.bytes) / 1e9 / m.seconds : 0;
  r.busBw = r.algBw * hostengine::busFactor(m.pattern, m.nranks);
  r.errors = m.errors;
  return r;
}

std::string tableHeader(hostengine::Pattern pattern) {
  const char* timeWhat = pattern == hostengine::Pattern::kPingPong ? "one-way" : "time";
  char text[256];
  std::snprintf(text, sizeof(text),
                "#%13s %13s %7s %10s %8s %8s %8s\n#%13s %13s %7s %10s %8s %8s %8s", "size", "count",
                "type", timeWhat, "algbw", "busbw", "#wrong", "(B)", "(elements)", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  return text;
}

std::string tableRow(hostengine::Pattern pattern, const SizeResult& row) {
  char text[160];
  std::snprintf(text, sizeof(text), " %13zu %13zu %7s %10.2f %8.3f %8.3f %8llu", row.bytes,
                row.count, elementType(pattern), row.timeUs, row.algBw, row.busBw,
                static_cast<unsigned long long>(row.errors));
  return text;
}

}  // namespace resilient::harness
