// Seqlock helpers over the blackbox's slots in shared memory: one writer per
// slot, any number of readers in any process, no locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace resilient::blackbox {

// Writes `value` into `slot` (whose first member is the uint32 sequence word).
template <class Slot>
void seqWrite(Slot* slot, const Slot& value) noexcept {
  std::atomic_ref<uint32_t> seq(slot->seq);
  const uint32_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  Slot copy = value;
  copy.seq = s + 1;
  std::memcpy(static_cast<void*>(slot), &copy, sizeof copy);
  seq.store(s + 2, std::memory_order_release);
}

// Copies `slot` into `out`; false when a writer kept changing it.
template <class Slot>
bool seqRead(const Slot* slot, Slot* out) noexcept {
  auto* word = const_cast<uint32_t*>(&slot->seq);
  std::atomic_ref<uint32_t> seq(*word);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t before = seq.load(std::memory_order_acquire);
    if ((before & 1u) != 0) {
      continue;
    }
    std::memcpy(static_cast<void*>(out), slot, sizeof *out);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) == before) {
      out->seq = before;
      return true;
    }
  }
  return false;
}

}  // namespace resilient::blackbox
