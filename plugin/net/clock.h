// Monotonic nanoseconds for the data path and the watchdog (vDSO, no syscall).
#pragma once

#include <time.h>

#include <cstdint>

namespace resilient::net {

inline uint64_t nowNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace resilient::net
