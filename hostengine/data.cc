#include "hostengine/data.h"

#include <cstring>

namespace resilient::hostengine {
namespace {

// A 64-bit finalizer (splitmix64's): every input bit affects every output bit.
inline uint64_t mix(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t patternWord(uint64_t seed, uint64_t word) noexcept {
  return mix(seed ^ mix(word));
}

// The per-element hash of the all-reduce inputs; ranks take different bits of it.
inline uint64_t reduceBase(uint64_t iteration, size_t index) noexcept {
  return mix((iteration << 40) ^ index ^ 0x5a17ull);
}

inline int rankShift(int rank) noexcept {
  return (rank * 7) % 61;
}

inline float rankValue(uint64_t base, int rank) noexcept {
  return static_cast<float>(static_cast<int>((base >> rankShift(rank)) & 15) - 8);
}

}  // namespace

uint64_t streamSeed(int src, int dst, uint64_t iteration) noexcept {
  return mix((static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) ^
             static_cast<uint32_t>(dst) ^ mix(iteration + 0x1234567ull));
}

uint8_t patternByte(uint64_t seed, size_t offset) noexcept {
  return static_cast<uint8_t>(patternWord(seed, offset / 8) >> ((offset % 8) * 8));
}

void fillPattern(void* data, size_t bytes, uint64_t seed, size_t offset) noexcept {
  auto* out = static_cast<uint8_t*>(data);
  size_t i = 0;
  while (i < bytes && (offset + i) % 8 != 0) {
    out[i] = patternByte(seed, offset + i);
    ++i;
  }
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = patternWord(seed, (offset + i) / 8);
    std::memcpy(out + i, &w, 8);  // little endian: byte k of the word is offset 8w + k
  }
  for (; i < bytes; ++i) {
    out[i] = patternByte(seed, offset + i);
  }
}

uint64_t countPatternErrors(const void* data, size_t bytes, uint64_t seed, size_t offset) noexcept {
  const auto* in = static_cast<const uint8_t*>(data);
  uint64_t errors = 0;
  size_t i = 0;
  while (i < bytes && (offset + i) % 8 != 0) {
    errors += in[i] != patternByte(seed, offset + i) ? 1 : 0;
    ++i;
  }
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t want = patternWord(seed, (offset + i) / 8);
    uint64_t got = 0;
    std::memcpy(&got, in + i, 8);
    if (got != want) {
      for (int k = 0; k < 8; ++k) {
        errors += ((got ^ want) >> (8 * k)) & 0xff ? 1 : 0;
      }
    }
  }
  for (; i < bytes; ++i) {
    errors += in[i] != patternByte(seed, offset + i) ? 1 : 0;
  }
  return errors;
}

float reduceInput(int rank, uint64_t iteration, size_t index) noexcept {
  return rankValue(reduceBase(iteration, index), rank);
}

void fillReduceInput(float* data, size_t count, int rank, uint64_t iteration) noexcept {
  for (size_t i = 0; i < count; ++i) {
    data[i] = rankValue(reduceBase(iteration, i), rank);
  }
}

float reduceExpected(int nranks, uint64_t iteration, size_t index) noexcept {
  const uint64_t base = reduceBase(iteration, index);
  int sum = 0;
  for (int r = 0; r < nranks; ++r) {
    sum += static_cast<int>((base >> rankShift(r)) & 15) - 8;
  }
  return static_cast<float>(sum);
}

uint64_t countReduceErrors(const float* data, size_t count, int nranks,
                           uint64_t iteration) noexcept {
  uint64_t errors = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = reduceExpected(nranks, iteration, i);
    // Bitwise, so that -0.0 for 0.0 or a NaN also counts.
    uint32_t gotBits = 0;
    uint32_t wantBits = 0;
    std::memcpy(&gotBits, &data[i], sizeof(float));
    std::memcpy(&wantBits, &want, sizeof(float));
    errors += gotBits != wantBits ? 1 : 0;
  }
  return errors;
}

}  // namespace resilient::hostengine
