// A lock-free pool of slot indices 0..capacity-1 (a Treiber stack whose head
// carries a tag against ABA). The operation pools of the profiler: taking or
// returning a slot is one compare-and-swap, with no lock and no allocation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace resilient::profiler {

class IndexPool {
 public:
  // All indices start free. Allocates (control path only).
  explicit IndexPool(uint32_t capacity);
  IndexPool(const IndexPool&) = delete;
  IndexPool& operator=(const IndexPool&) = delete;

  // Takes a free index; false when none is left.
  bool pop(uint32_t* index) noexcept;
  // Returns an index taken by pop.
  void push(uint32_t index) noexcept;

  uint32_t capacity() const noexcept { return capacity_; }
  // Free indices now (walks the stack: tests and diagnostics only, quiescent pool).
  uint32_t countFree() const noexcept;

 private:
  static constexpr uint32_t kEnd = UINT32_MAX;
  static uint64_t pack(uint32_t tag, uint32_t index) noexcept {
    return (uint64_t{tag} << 32) | index;
  }

  const uint32_t capacity_;
  std::atomic<uint64_t> head_;  // (tag << 32) | index of the top, kEnd when empty
  std::unique_ptr<std::atomic<uint32_t>[]> next_;
};

}  // namespace resilient::profiler
