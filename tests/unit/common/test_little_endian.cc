#include <cstdint>

#include <catch2/catch.hpp>

#include "common/little_endian.h"

using namespace resilient;

TEST_CASE("integers are written and read as little-endian bytes", "[bytes]") {
  uint8_t b[8] = {};
  putU16(b, 0x0102);
  CHECK((b[0] == 0x02 && b[1] == 0x01));
  CHECK(getU16(b) == 0x0102);
  putU32(b, 0x01020304u);
  CHECK((b[0] == 0x04 && b[3] == 0x01));
  CHECK(getU32(b) == 0x01020304u);
  putU64(b, 0x0102030405060708ull);
  CHECK((b[0] == 0x08 && b[7] == 0x01));
  CHECK(getU64(b) == 0x0102030405060708ull);
  putU64(b, ~0ull);
  CHECK(getU64(b) == ~0ull);
  CHECK(getU16(b) == 0xffff);
}
