// A clock the test moves by hand, for timing logic without sleeps.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.h"

namespace resilient::test {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t startNs = 1000000000ull) : now_(startNs) {}
  uint64_t monoNs() const noexcept override { return now_.load(std::memory_order_relaxed); }
  uint64_t wallNs() const noexcept override {
    return 1700000000000000000ull + now_.load(std::memory_order_relaxed);
  }
  void advance(uint64_t ns) noexcept { now_.fetch_add(ns, std::memory_order_relaxed); }
  void advanceMs(uint64_t ms) noexcept { advance(ms * 1000000ull); }

 private:
  std::atomic<uint64_t> now_;
};

}  // namespace resilient::test
