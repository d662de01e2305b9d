#include "plugin/profiler/op_slot.h"

#include <cstring>

namespace resilient::profiler {
namespace {

using Word = uint64_t __attribute__((may_alias));

}  // namespace

void OpSlot::reset(int32_t initialRefs, uint32_t initialFlags) noexcept {
  refs.store(initialRefs, std::memory_order_relaxed);
  flags.store(initialFlags, std::memory_order_relaxed);
  proxyOps.store(0, std::memory_order_relaxed);
  progress.store(0, std::memory_order_relaxed);
  channelsStarted.store(0, std::memory_order_relaxed);
  channelsDone.store(0, std::memory_order_relaxed);
  startMonoNs.store(0, std::memory_order_relaxed);
  endMonoNs.store(0, std::memory_order_relaxed);
  gpuStartNs.store(0, std::memory_order_relaxed);
  gpuStopNs.store(0, std::memory_order_relaxed);
  syncWaitNs.store(0, std::memory_order_relaxed);
  syncChannels.store(0, std::memory_order_relaxed);
  static_assert(sizeof stepState % 8 == 0 && sizeof proxyOpen % 8 == 0);
  for (size_t off = 0; off < sizeof stepState; off += 8) {
    __atomic_store_n(reinterpret_cast<Word*>(stepState + off), 0, __ATOMIC_RELAXED);
    __atomic_store_n(reinterpret_cast<Word*>(proxyOpen + off), 0, __ATOMIC_RELAXED);
  }
}

void OpSlot::storeInfo(const OpInfo& value) noexcept {
  const auto* src = reinterpret_cast<const Word*>(&value);
  auto* dst = reinterpret_cast<Word*>(&info);
  for (size_t i = 0; i < sizeof(OpInfo) / 8; ++i) {
    __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
  }
}

OpInfo OpSlot::loadInfo() const noexcept {
  OpInfo out;
  const auto* src = reinterpret_cast<const Word*>(&info);
  auto* dst = reinterpret_cast<Word*>(&out);
  for (size_t i = 0; i < sizeof(OpInfo) / 8; ++i) {
    dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
  }
  return out;
}

}  // namespace resilient::profiler
