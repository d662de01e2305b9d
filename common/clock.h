// The one monotonic clock of the plugins and tools: CLOCK_MONOTONIC in
// nanoseconds (vDSO, no system call; comparable between the processes of one
// host), and the injectable Clock that timing logic is given, so that a test
// can drive it with a fake clock (tests/support/fake_clock.h) and no sleeps.
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

// A time source, injectable: the profiler's tracker and hang detector and the
// net plugin's watchdog read it; tests hand them a fake one.
class Clock {
 public:
  virtual ~Clock() = default;
  // CLOCK_MONOTONIC nanoseconds (what the blackbox calls "mono").
  virtual uint64_t monoNs() const noexcept = 0;
  // CLOCK_REALTIME nanoseconds ("wall").
  virtual uint64_t wallNs() const noexcept = 0;
};

// The real clocks (vDSO: no system call).
class SystemClock final : public Clock {
 public:
  uint64_t monoNs() const noexcept override { return monotonicNs(); }
  uint64_t wallNs() const noexcept override { return wallClockNs(); }
};

}  // namespace resilient
