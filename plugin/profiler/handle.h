// Event handles: what startEvent stores in *eHandle and NCCL hands back to
// stopEvent, recordEventState and as the parentObj of child events.
//
// A handle is not a pointer but a 64-bit value that names a context slot, an
// operation slot in that context's pool, the slot's generation and a
// channel. Decoding never dereferences anything NCCL gives us: an unknown,
// stale (operation already released) or foreign value (a PXN proxy op's
// parent from another process) is recognised and ignored, never followed.
//
//   bits  0..5   channel (NCCL's MAXCHANNELS is 64); for a kernel phase, its
//                slot in the context's phase table (kernel_phase.h)
//   bits  6..9   kind
//   bits 10..19  context slot (kMaxContexts)
//   bits 20..33  operation slot (kMaxOpsPerContext)
//   bits 34..63  operation generation (never 0 for a live operation)
#pragma once

#include <cstdint>

namespace resilient::profiler {

inline constexpr uint32_t kMaxChannels = 64;
inline constexpr uint32_t kMaxContexts = 1024;
inline constexpr uint32_t kMaxOpsPerContext = 16384;
inline constexpr uint32_t kGenerationMask = (1u << 30) - 1;

enum class HandleKind : uint32_t {
  kNone = 0,         // not a handle of ours (NULL decodes to this)
  kOp = 1,           // a Coll or P2p event: one tracked operation
  kProxyOp = 2,      // a proxy op of an operation, on one channel
  kProxyStep = 3,    // a proxy step (shares its proxy op's operation and channel)
  kKernelCh = 4,     // a kernel channel of an operation
  kNetPlugin = 5,    // a net-plugin event under a proxy step
  kPassive = 6,      // events we do not track (API, group, proxy control, PXN ops)
  kKernelPhase = 7,  // a phase of a kernel channel (v7): its operation, and its phase slot
};
inline constexpr uint32_t kLastHandleKind = static_cast<uint32_t>(HandleKind::kKernelPhase);

struct Handle {
  HandleKind kind = HandleKind::kNone;
  uint32_t channel = 0;
  uint32_t context = 0;
  uint32_t slot = 0;
  uint32_t generation = 0;
};

inline void* encodeHandle(const Handle& h) noexcept {
  const uint64_t v = uint64_t{h.channel & 63u} | (uint64_t{static_cast<uint32_t>(h.kind)} << 6) |
                     (uint64_t{h.context & (kMaxContexts - 1)} << 10) |
                     (uint64_t{h.slot & (kMaxOpsPerContext - 1)} << 20) |
                     (uint64_t{h.generation & kGenerationMask} << 34);
  // NCCL stores and passes back an opaque void*: the value is the handle.
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v));  // NOLINT(performance-no-int-to-ptr)
}

// Field accessors on the raw value (the hot path keeps the value in a
// register instead of a decoded struct).
inline uint64_t handleBits(const void* handle) noexcept {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}
inline HandleKind handleKind(uint64_t v) noexcept {
  const auto kind = static_cast<uint32_t>((v >> 6) & 15u);
  return kind > kLastHandleKind ? HandleKind::kNone : static_cast<HandleKind>(kind);
}
inline uint32_t handleChannel(uint64_t v) noexcept {
  return static_cast<uint32_t>(v & 63u);
}
inline uint32_t handleContext(uint64_t v) noexcept {
  return static_cast<uint32_t>((v >> 10) & (kMaxContexts - 1));
}
inline uint32_t handleSlot(uint64_t v) noexcept {
  return static_cast<uint32_t>((v >> 20) & (kMaxOpsPerContext - 1));
}
inline uint32_t handleGeneration(uint64_t v) noexcept {
  return static_cast<uint32_t>(v >> 34) & kGenerationMask;
}

inline Handle decodeHandle(const void* handle) noexcept {
  const auto v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  Handle h;
  const auto kind = static_cast<uint32_t>((v >> 6) & 15u);
  if (kind == 0 || kind > kLastHandleKind) {
    return h;  // kNone
  }
  h.kind = static_cast<HandleKind>(kind);
  h.channel = static_cast<uint32_t>(v & 63u);
  h.context = static_cast<uint32_t>((v >> 10) & (kMaxContexts - 1));
  h.slot = static_cast<uint32_t>((v >> 20) & (kMaxOpsPerContext - 1));
  h.generation = static_cast<uint32_t>(v >> 34) & kGenerationMask;
  return h;
}

}  // namespace resilient::profiler
