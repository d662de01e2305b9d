// Seqlock helpers over the blackbox's slots in shared memory: one writer per
// slot, any number of readers in any process, no locks.
//
// The payload is copied word by word with relaxed atomic accesses (the same
// machine instructions as a memcpy of aligned words on x86-64 and aarch64), so
// that a reader racing a writer is a well-defined race the sequence word
// resolves, not undefined behaviour, and ThreadSanitizer agrees.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace resilient::blackbox {
namespace detail {

using Word = uint64_t __attribute__((may_alias));
using HalfWord = uint32_t __attribute__((may_alias));

// Copies bytes [4, sizeof(Slot)) of `from` into `to`: everything after the
// 32-bit sequence word, which callers handle themselves.
template <class Slot>
inline void copyPayload(void* to, const void* from) noexcept {
  static_assert(std::is_trivially_copyable_v<Slot>, "blackbox slots are plain C structs");
  static_assert(sizeof(Slot) % 8 == 0 && alignof(Slot) >= 8, "slots are whole aligned words");
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  __atomic_store_n(reinterpret_cast<HalfWord*>(dst + 4),
                   __atomic_load_n(reinterpret_cast<const HalfWord*>(src + 4), __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
  for (size_t off = 8; off < sizeof(Slot); off += 8) {
    __atomic_store_n(reinterpret_cast<Word*>(dst + off),
                     __atomic_load_n(reinterpret_cast<const Word*>(src + off), __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
  }
}

}  // namespace detail

// Writes `value` into `slot` (whose first member is the uint32 sequence word).
template <class Slot>
void seqWrite(Slot* slot, const Slot& value) noexcept {
  std::atomic_ref<uint32_t> seq(slot->seq);
  const uint32_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  detail::copyPayload<Slot>(slot, &value);
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
    detail::copyPayload<Slot>(out, slot);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) == before) {
      out->seq = before;
      return true;
    }
  }
  return false;
}

}  // namespace resilient::blackbox
