// The profiler's time source, injectable so that the hang detector can be
// tested with a fake clock. The hot path reads it at most twice per operation
// (enqueue, first kernel channel, completion), never per event.
#pragma once

#include <time.h>

#include <cstdint>

namespace resilient::profiler {

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
  uint64_t monoNs() const noexcept override { return read(CLOCK_MONOTONIC); }
  uint64_t wallNs() const noexcept override { return read(CLOCK_REALTIME); }

 private:
  static uint64_t read(clockid_t id) noexcept {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
};

}  // namespace resilient::profiler
