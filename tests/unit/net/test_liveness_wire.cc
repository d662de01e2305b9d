#include <string>

#include <catch2/catch.hpp>

#include "plugin/net/liveness/wire.h"

using namespace resilient::net::liveness;

namespace {

Frame roundTrip(const Frame& in) {
  std::string bytes;
  encode(in, &bytes);
  Decoder d;
  d.feed(bytes.data(), bytes.size());
  Frame out;
  std::string error;
  REQUIRE(d.next(&out, &error) == Decoder::Result::kFrame);
  return out;
}

}  // namespace

TEST_CASE("liveness frames round-trip", "[net][liveness-wire]") {
  const Frame hello = roundTrip(makeHello(0xfeedull, 77, "node-17"));
  CHECK(hello.type == Type::kHello);
  CHECK(hello.value == 0xfeedull);
  CHECK(hello.pid == 77);
  CHECK(hello.host == "node-17");
  CHECK(roundTrip(makeFrame(Type::kBind, 12345)).value == 12345);
  CHECK(roundTrip(makeFrame(Type::kPing, 9)).type == Type::kPing);
  CHECK(roundTrip(makeFrame(Type::kPong, 9)).value == 9);
  CHECK(roundTrip(makeFrame(Type::kGoodbye)).type == Type::kGoodbye);
}

TEST_CASE("the decoder reassembles frames fed byte by byte", "[net][liveness-wire]") {
  std::string bytes;
  encode(makeHello(1, 2, "host"), &bytes);
  encode(makeFrame(Type::kPing, 3), &bytes);
  Decoder d;
  Frame f;
  std::string error;
  int frames = 0;
  for (char c : bytes) {
    d.feed(&c, 1);
    while (d.next(&f, &error) == Decoder::Result::kFrame) {
      ++frames;
    }
  }
  CHECK(frames == 2);
  CHECK(f.type == Type::kPing);
}

TEST_CASE("malformed liveness input is refused", "[net][liveness-wire]") {
  std::string bytes;
  encode(makeFrame(Type::kPing, 1), &bytes);
  Decoder d;
  Frame f;
  std::string error;
  SECTION("bad magic") {
    bytes[0] ^= 1;
    d.feed(bytes.data(), bytes.size());
    CHECK(d.next(&f, &error) == Decoder::Result::kError);
    CHECK(error == "bad magic");
  }
  SECTION("another version") {
    bytes[4] = 9;
    d.feed(bytes.data(), bytes.size());
    CHECK(d.next(&f, &error) == Decoder::Result::kError);
    CHECK(error.find("version") != std::string::npos);
  }
  SECTION("oversized payload") {
    const uint32_t huge = kMaxPayload + 1;
    bytes.replace(8, 4, reinterpret_cast<const char*>(&huge), 4);
    d.feed(bytes.data(), bytes.size());
    CHECK(d.next(&f, &error) == Decoder::Result::kError);
  }
  SECTION("unknown type") {
    bytes[6] = 99;
    d.feed(bytes.data(), bytes.size());
    CHECK(d.next(&f, &error) == Decoder::Result::kError);
  }
  SECTION("garbage") {
    const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    d.feed(junk.data(), junk.size());
    CHECK(d.next(&f, &error) == Decoder::Result::kError);
  }
}
