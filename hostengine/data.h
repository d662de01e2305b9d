// Deterministic test data. Every byte a rank sends is a function of the
// sending rank, the receiving rank, the iteration and its offset, so every
// byte received can be checked without any copy of the sender's buffer.
// All-reduce inputs are small integers stored as float32: every partial sum
// is exact, in any order, for up to kMaxReduceRanks ranks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace resilient::hostengine {

inline constexpr int kMaxReduceRanks = 1 << 16;

// The seed of the byte stream `src` sends to `dst` in `iteration`.
uint64_t streamSeed(int src, int dst, uint64_t iteration) noexcept;

// The byte at `offset` of the stream `seed`.
uint8_t patternByte(uint64_t seed, size_t offset) noexcept;
// Writes bytes [offset, offset + bytes) of the stream `seed` to `data`.
void fillPattern(void* data, size_t bytes, uint64_t seed, size_t offset = 0) noexcept;
// The number of bytes of `data` that differ from bytes [offset, offset + bytes) of `seed`.
uint64_t countPatternErrors(const void* data, size_t bytes, uint64_t seed,
                            size_t offset = 0) noexcept;

// Element `index` of `rank`'s all-reduce input in `iteration`: an integer in [-8, 7].
float reduceInput(int rank, uint64_t iteration, size_t index) noexcept;
void fillReduceInput(float* data, size_t count, int rank, uint64_t iteration) noexcept;
// The sum over ranks 0..nranks-1 of reduceInput(rank, iteration, index).
float reduceExpected(int nranks, uint64_t iteration, size_t index) noexcept;
// The number of elements of `data` that differ from reduceExpected (bitwise).
uint64_t countReduceErrors(const float* data, size_t count, int nranks,
                           uint64_t iteration) noexcept;

}  // namespace resilient::hostengine
