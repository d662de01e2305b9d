// Sizes on the command line and the result table of resilient-nettest, in
// the spirit of nccl-tests: one row per size with time, algorithm and bus
// bandwidth and the count of wrong elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "hostengine/pattern.h"

namespace resilient::harness {

// Largest size accepted anywhere (1 TiB).
inline constexpr size_t kMaxSizeBytes = size_t{1} << 40;

// "8", "64K", "1M", "2G": binary multiples (K = 1024), case-insensitive, an
// optional trailing "B" or "iB" ("64KiB"). Anything else, or a size over
// kMaxSizeBytes, is invalidUsage.
Result<size_t> parseSize(std::string_view text);

// min, min*factor, ... up to max (max included only when reached exactly, as
// nccl-tests does); a 0 is followed by 1. factor >= 2; min <= max.
Result<std::vector<size_t>> sizeSweep(size_t minBytes, size_t maxBytes, uint64_t factor);

// One row of the table.
struct SizeResult {
  size_t bytes = 0;   // effective bytes (pattern.h)
  size_t count = 0;   // elements
  double timeUs = 0;  // per operation, slowest rank (ping-pong: one way)
  double algBw = 0;   // GB/s (10^9 bytes per second)
  double busBw = 0;   // GB/s
  uint64_t errors = 0;
};

// What one size measured, from which makeSizeResult computes a row.
struct SizeMeasurement {
  hostengine::Pattern pattern = hostengine::Pattern::kAllReduce;
  int nranks = 0;
  size_t bytes = 0;     // the size asked for
  double seconds = 0;   // per operation, slowest rank
  uint64_t errors = 0;  // wrong elements
};

SizeResult makeSizeResult(const SizeMeasurement& m);

// The two header lines and one line per row (no trailing newline).
std::string tableHeader(hostengine::Pattern pattern);
std::string tableRow(hostengine::Pattern pattern, const SizeResult& row);

}  // namespace resilient::harness
