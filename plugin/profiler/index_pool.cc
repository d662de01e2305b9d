#include "plugin/profiler/index_pool.h"

namespace resilient::profiler {

IndexPool::IndexPool(uint32_t capacity)
    : capacity_(capacity),
      head_(pack(0, capacity > 0 ? 0 : kEnd)),
      next_(new std::atomic<uint32_t>[capacity]) {
  for (uint32_t i = 0; i < capacity; ++i) {
    next_[i].store(i + 1 < capacity ? i + 1 : kEnd, std::memory_order_relaxed);
  }
}

bool IndexPool::pop(uint32_t* index) noexcept {
  uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    const auto top = static_cast<uint32_t>(head);
    if (top == kEnd) {
      return false;
    }
    // `top` may be taken and pushed back by others meanwhile: then the tag
    // has moved on and the exchange fails, whatever `next` we read.
    const uint32_t next = next_[top].load(std::memory_order_relaxed);
    if (head_.compare_exchange_weak(head, pack(static_cast<uint32_t>(head >> 32) + 1, next),
                                    std::memory_order_acquire, std::memory_order_acquire)) {
      *index = top;
      return true;
    }
  }
}

void IndexPool::push(uint32_t index) noexcept {
  uint64_t head = head_.load(std::memory_order_relaxed);
  for (;;) {
    next_[index].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    if (head_.compare_exchange_weak(head, pack(static_cast<uint32_t>(head >> 32) + 1, index),
                                    std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
  }
}

uint32_t IndexPool::countFree() const noexcept {
  uint32_t n = 0;
  for (auto i = static_cast<uint32_t>(head_.load(std::memory_order_acquire));
       i != kEnd && n <= capacity_; i = next_[i].load(std::memory_order_relaxed)) {
    ++n;
  }
  return n;
}

}  // namespace resilient::profiler
