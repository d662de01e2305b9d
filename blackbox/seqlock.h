// Seqlock helpers over the blackbox's slots in shared memory: one writer per
// slot, any number of readers in any process, no locks.
//
// The payload is copied word by word with atomic accesses, so that a reader
// racing a writer is a well-defined race the sequence word resolves, not
// undefined behaviour, and ThreadSanitizer agrees. No fences (GCC cannot
// check them under ThreadSanitizer): the writer's payload stores are
// release stores, so none can move before the odd sequence word; the
// reader's payload loads are acquire loads, so the second read of the
// sequence word cannot move before them (H.-J. Boehm, "Can seqlocks get along
// with programming language memory models?", 2012). On x86-64 these are plain
// moves, the same instructions as a memcpy of aligned words.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace resilient::blackbox {
namespace detail {

using Word = uint64_t __attribute__((may_alias));
using HalfWord = uint32_t __attribute__((may_alias));

template <class Slot>
constexpr void checkSlot() {
  static_assert(std::is_trivially_copyable_v<Slot>, "blackbox slots are plain C structs");
  static_assert(sizeof(Slot) % 8 == 0 && alignof(Slot) >= 8, "slots are whole aligned words");
}

// Bytes [4, sizeof(Slot)) of `from` (private) into `to` (shared): everything
// after the 32-bit sequence word.
template <class Slot>
inline void storePayload(void* to, const void* from) noexcept {
  checkSlot<Slot>();
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  __atomic_store_n(reinterpret_cast<HalfWord*>(dst + 4),
                   *reinterpret_cast<const HalfWord*>(src + 4), __ATOMIC_RELEASE);
  for (size_t off = 8; off < sizeof(Slot); off += 8) {
    __atomic_store_n(reinterpret_cast<Word*>(dst + off), *reinterpret_cast<const Word*>(src + off),
                     __ATOMIC_RELEASE);
  }
}

// Bytes [4, sizeof(Slot)) of `from` (shared) into `to` (private).
template <class Slot>
inline void loadPayload(void* to, const void* from) noexcept {
  checkSlot<Slot>();
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  *reinterpret_cast<HalfWord*>(dst + 4) =
      __atomic_load_n(reinterpret_cast<const HalfWord*>(src + 4), __ATOMIC_ACQUIRE);
  for (size_t off = 8; off < sizeof(Slot); off += 8) {
    *reinterpret_cast<Word*>(dst + off) =
        __atomic_load_n(reinterpret_cast<const Word*>(src + off), __ATOMIC_ACQUIRE);
  }
}

}  // namespace detail

// Writes `value` into `slot` (whose first member is the uint32 sequence word).
template <class Slot>
void seqWrite(Slot* slot, const Slot& value) noexcept {
  std::atomic_ref<uint32_t> seq(slot->seq);
  const uint32_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);  // odd: being written
  detail::storePayload<Slot>(slot, &value);
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
    detail::loadPayload<Slot>(out, slot);
    if (seq.load(std::memory_order_relaxed) == before) {
      out->seq = before;
      return true;
    }
  }
  return false;
}

}  // namespace resilient::blackbox
