// Deterministic data: generation and validation catch every changed byte.
#include <cstring>
#include <vector>

#include "hostengine/data.h"

namespace he = resilient::hostengine;

TEST_CASE("pattern bytes depend on source, destination, iteration and offset",
          "[hostengine][data]") {
  const uint64_t seed = he::streamSeed(1, 2, 3);
  CHECK(seed != he::streamSeed(2, 1, 3));
  CHECK(seed != he::streamSeed(1, 2, 4));
  CHECK(seed != he::streamSeed(1, 3, 3));
  std::vector<uint8_t> a(4096);
  std::vector<uint8_t> b(4096);
  he::fillPattern(a.data(), a.size(), seed);
  he::fillPattern(b.data(), b.size(), he::streamSeed(1, 2, 4));
  CHECK(a != b);
  size_t distinct = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    distinct += a[i] != a[i - 1] ? 1 : 0;
  }
  CHECK(distinct > 4000);
}

TEST_CASE("filling at any offset matches the byte function", "[hostengine][data]") {
  const uint64_t seed = he::streamSeed(5, 0, 9);
  for (size_t offset : {0, 1, 3, 7, 8, 13, 4093}) {
    for (size_t bytes : {0, 1, 5, 8, 9, 31, 1000}) {
      CAPTURE(offset, bytes);
      std::vector<uint8_t> buf(bytes + 1, 0xee);
      he::fillPattern(buf.data(), bytes, seed, offset);
      for (size_t i = 0; i < bytes; ++i) {
        REQUIRE(buf[i] == he::patternByte(seed, offset + i));
      }
      CHECK(buf[bytes] == 0xee);  // nothing written past the end
      CHECK(he::countPatternErrors(buf.data(), bytes, seed, offset) == 0);
    }
  }
}

TEST_CASE("validation counts every flipped byte", "[hostengine][data]") {
  const uint64_t seed = he::streamSeed(0, 1, 0);
  std::vector<uint8_t> buf(10007);
  for (size_t offset : {0, 5}) {
    he::fillPattern(buf.data(), buf.size(), seed, offset);
    REQUIRE(he::countPatternErrors(buf.data(), buf.size(), seed, offset) == 0);
    for (size_t at : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{5000}, buf.size() - 1}) {
      CAPTURE(offset, at);
      buf[at] ^= 0x01;
      CHECK(he::countPatternErrors(buf.data(), buf.size(), seed, offset) == 1);
      buf[at] ^= 0x01;
    }
    buf[100] ^= 0xff;
    buf[101] ^= 0x10;
    buf[9000] = static_cast<uint8_t>(buf[9000] + 1);
    CHECK(he::countPatternErrors(buf.data(), buf.size(), seed, offset) == 3);
  }
  // Right bytes at the wrong offset, or from the wrong iteration, are wrong.
  he::fillPattern(buf.data(), buf.size(), seed, 0);
  CHECK(he::countPatternErrors(buf.data(), buf.size(), seed, 8) > 9000);
  CHECK(he::countPatternErrors(buf.data(), buf.size(), he::streamSeed(0, 1, 1), 0) > 9000);
}

TEST_CASE("all-reduce inputs sum exactly to the expected values", "[hostengine][data]") {
  for (int nranks : {1, 2, 3, 8, 61, 64}) {
    for (uint64_t iteration : {0, 1, 77}) {
      CAPTURE(nranks, iteration);
      const size_t count = 1000;
      std::vector<float> sum(count, 0.0f);
      std::vector<float> input(count);
      for (int r = 0; r < nranks; ++r) {
        he::fillReduceInput(input.data(), count, r, iteration);
        for (size_t i = 0; i < count; ++i) {
          REQUIRE(input[i] >= -8.0f);
          REQUIRE(input[i] <= 7.0f);
          REQUIRE(input[i] == he::reduceInput(r, iteration, i));
          sum[i] += input[i];
        }
      }
      CHECK(he::countReduceErrors(sum.data(), count, nranks, iteration) == 0);
      for (size_t i = 0; i < count; ++i) {
        REQUIRE(sum[i] == he::reduceExpected(nranks, iteration, i));
      }
    }
  }
}

TEST_CASE("all-reduce validation catches a flipped byte and a missing rank", "[hostengine][data]") {
  const int nranks = 4;
  const size_t count = 4099;
  std::vector<float> sum(count);
  for (size_t i = 0; i < count; ++i) {
    sum[i] = he::reduceExpected(nranks, 5, i);
  }
  REQUIRE(he::countReduceErrors(sum.data(), count, nranks, 5) == 0);
  auto* bytes = reinterpret_cast<uint8_t*>(sum.data());
  bytes[4 * 1234 + 2] ^= 0x04;
  CHECK(he::countReduceErrors(sum.data(), count, nranks, 5) == 1);
  bytes[4 * 1234 + 2] ^= 0x04;
  // A sum that lacks one rank's contribution differs wherever that input is not 0.
  size_t nonzero = 0;
  for (size_t i = 0; i < count; ++i) {
    const float missing = he::reduceInput(2, 5, i);
    nonzero += missing != 0.0f ? 1 : 0;
    sum[i] -= missing;
  }
  CHECK(he::countReduceErrors(sum.data(), count, nranks, 5) == nonzero);
  CHECK(nonzero > count / 2);
  // Another iteration's data is wrong.
  CHECK(he::countReduceErrors(sum.data(), count, nranks, 6) > count / 2);
}
