#include <cstring>
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

// The decoder's error for `bytes` with its header's length fixed up to what
// the bytes hold ("" when it decodes a frame).
std::string decodeError(std::string bytes) {
  const uint32_t length = static_cast<uint32_t>(bytes.size() - kHeaderSize);
  std::memcpy(bytes.data() + 8, &length, sizeof length);
  Decoder d;
  d.feed(bytes.data(), bytes.size());
  Frame f;
  std::string error;
  return d.next(&f, &error) == Decoder::Result::kError ? error : std::string();
}

}  // namespace

TEST_CASE("liveness frames round-trip", "[net][liveness-wire]") {
  const resilient::auth::Nonce nonce = resilient::auth::freshNonce();
  const Frame hello = roundTrip(makeHello(nonce, 77, "node-17"));
  CHECK(hello.type == Type::kHello);
  CHECK(hello.nonce == nonce);
  CHECK(hello.pid == 77);
  CHECK(hello.host == "node-17");
  resilient::auth::Proof proof{};
  proof[0] = 1;
  proof[31] = 2;
  const Frame challenge = roundTrip(makeChallenge(nonce, 78, "node-18", proof));
  CHECK(challenge.type == Type::kChallenge);
  CHECK(challenge.nonce == nonce);
  CHECK(challenge.pid == 78);
  CHECK(challenge.host == "node-18");
  CHECK(challenge.proof == proof);
  CHECK(roundTrip(makeProof(proof)).proof == proof);
  CHECK(roundTrip(makeFrame(Type::kBind, 12345)).value == 12345);
  CHECK(roundTrip(makeFrame(Type::kPing, 9)).type == Type::kPing);
  CHECK(roundTrip(makeFrame(Type::kPong, 9)).value == 9);
  CHECK(roundTrip(makeFrame(Type::kGoodbye)).type == Type::kGoodbye);
}

TEST_CASE("a goodbye is empty, or names the fault its sender closes for", "[net][liveness-wire]") {
  std::string plain;
  encode(makeGoodbye(), &plain);
  CHECK(plain.size() == kHeaderSize);  // what version-1 peers before reasons send and expect
  const Frame bare = roundTrip(makeGoodbye());
  CHECK(bare.value == 0);
  CHECK(bare.host.empty());

  const Frame why = roundTrip(makeGoodbye(2, 4242, "node-3", "no answer for 1500 ms"));
  CHECK(why.type == Type::kGoodbye);
  CHECK(why.value == 2);
  CHECK(why.pid == 4242);
  CHECK(why.host == "node-3");
  CHECK(why.detail == "no answer for 1500 ms");

  // Long texts are cut to what the frame allows, and still decode.
  const Frame longer = roundTrip(makeGoodbye(1, 1, std::string(400, 'h'), std::string(400, 'd')));
  CHECK(longer.host.size() == kMaxHostName);
  CHECK(longer.detail.size() == kMaxGoodbyeDetail);

  // A reason payload that does not add up is refused.
  std::string bytes;
  encode(makeGoodbye(2, 4242, "node-3", "detail"), &bytes);
  for (const size_t cut : {size_t{1}, size_t{3}}) {
    CHECK(decodeError(bytes.substr(0, bytes.size() - cut)) == "malformed goodbye");
  }
}

TEST_CASE("a fault notice names its communicator", "[net][liveness-wire]") {
  // Its receivers fail their busy connections of that communicator (the
  // GPU kit's second-hand detection, test_plugin_loopback.cc).
  const Frame notice =
      roundTrip(makeFaultNotice(1, 884, "vm", "irecv failed", 0xa91ef34bf5749bc0ULL));
  CHECK(notice.type == Type::kFault);
  CHECK(notice.value == 1);
  CHECK(notice.pid == 884);
  CHECK(notice.commId == 0xa91ef34bf5749bc0ULL);
  CHECK(notice.host == "vm");
  CHECK(notice.detail == "irecv failed");
  // The longest notice fits a frame.
  const Frame longest =
      roundTrip(makeFaultNotice(1, 1, std::string(400, 'h'), std::string(400, 'd'), ~0ULL));
  CHECK(longest.commId == ~0ULL);
  CHECK(longest.detail.size() == kMaxGoodbyeDetail);
  // One without its communicator (a version-1 layout) is refused.
  std::string bytes;
  encode(makeGoodbye(1, 884, "vm", "x"), &bytes);
  const uint16_t type = static_cast<uint16_t>(Type::kFault);
  std::memcpy(bytes.data() + 6, &type, sizeof type);
  Decoder d;
  d.feed(bytes.data(), bytes.size());
  Frame f;
  std::string error;
  CHECK(d.next(&f, &error) == Decoder::Result::kError);
  CHECK(error == "malformed fault notice");
}

TEST_CASE("the decoder reassembles frames fed byte by byte", "[net][liveness-wire]") {
  std::string bytes;
  encode(makeHello(resilient::auth::freshNonce(), 2, "host"), &bytes);
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

TEST_CASE("the handshake frames are checked to the byte", "[net][liveness-wire]") {
  // Nothing derived from the job token alone: a hello carries a nonce, pid
  // and host; a challenge adds a proof, which the decoder keeps whole.
  for (const Frame& frame : {makeHello(resilient::auth::freshNonce(), 1, "h"),
                             makeChallenge(resilient::auth::freshNonce(), 1, "h", {}),
                             makeProof({})}) {
    std::string bytes;
    encode(frame, &bytes);
    CHECK(decodeError(bytes.substr(0, bytes.size() - 1)).find("malformed") == 0);
    CHECK(decodeError(bytes + "x").find("malformed") == 0);
  }
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
