// The communication patterns of the host engine and what nccl-tests calls
// their bus factors: how a pattern's algorithm bandwidth (bytes / time) maps
// onto the bandwidth each link must carry.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace resilient::hostengine {

enum class Pattern {
  kPingPong,   // 2 ranks: a message there and back; time is half the round trip
  kSendRecv,   // rank i sends to i+1 and receives from i-1, all at once
  kAllReduce,  // ring all-reduce (sum) of float32: reduce-scatter then all-gather
  kAllToAll,   // every rank sends one block to every rank
};

const char* patternName(Pattern pattern) noexcept;
std::optional<Pattern> parsePattern(std::string_view name) noexcept;

// nccl-tests' factors: all-reduce 2(n-1)/n, all-to-all (n-1)/n, send/recv and
// ping-pong 1.
double busFactor(Pattern pattern, int nranks) noexcept;

// The bytes a requested size becomes: all-reduce moves whole float32
// elements, all-to-all a multiple of nranks (one equal block per rank).
size_t effectiveBytes(Pattern pattern, int nranks, size_t bytes) noexcept;
// Elements of the table's count column (floats for all-reduce, bytes otherwise).
size_t elementCount(Pattern pattern, int nranks, size_t bytes) noexcept;
// "float" or "uint8".
const char* elementType(Pattern pattern) noexcept;
size_t elementBytes(Pattern pattern) noexcept;

}  // namespace resilient::hostengine
