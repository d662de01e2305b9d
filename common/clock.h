// The one monotonic clock of the plugins and tools: CLOCK_MONOTONIC in
// nanoseconds (vDSO, no system call; comparable between the processes of one
// host).
#pragma once

#include <time.h>

#include <cstdint>

namespace resilient {

inline uint64_t monotonicNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_REALTIME in nanoseconds: for records read on other hosts and by people.
inline uint64_t wallClockNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace resilient
