// Unsigned integers as little-endian bytes at a fixed offset: how the wire
// protocols (TCP transport handshake and frames, host-engine rendezvous)
// encode their fields, independent of the host's byte order and of struct
// layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace resilient {

template <class T>
void putLittleEndian(uint8_t* p, T v) noexcept {
  static_assert(std::is_unsigned_v<T>);
  for (size_t i = 0; i < sizeof(T); ++i) {
    p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

template <class T>
T getLittleEndian(const uint8_t* p) noexcept {
  static_assert(std::is_unsigned_v<T>);
  T v = 0;
  for (size_t i = sizeof(T); i-- > 0;) {
    v = static_cast<T>((v << 8) | p[i]);
  }
  return v;
}

inline void putU16(uint8_t* p, uint16_t v) noexcept {
  putLittleEndian(p, v);
}
inline void putU32(uint8_t* p, uint32_t v) noexcept {
  putLittleEndian(p, v);
}
inline void putU64(uint8_t* p, uint64_t v) noexcept {
  putLittleEndian(p, v);
}
inline uint16_t getU16(const uint8_t* p) noexcept {
  return getLittleEndian<uint16_t>(p);
}
inline uint32_t getU32(const uint8_t* p) noexcept {
  return getLittleEndian<uint32_t>(p);
}
inline uint64_t getU64(const uint8_t* p) noexcept {
  return getLittleEndian<uint64_t>(p);
}

}  // namespace resilient
