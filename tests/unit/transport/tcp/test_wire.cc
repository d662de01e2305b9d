#include <sys/socket.h>

#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "common/token_digest.h"
#include "plugin/transport/tcp/wire.h"
#include "plugin/transport/transport.h"

using namespace resilient;
using namespace resilient::transport::tcp;

namespace {

Hello sampleHello() {
  Hello h;
  h.tokenDigest = tokenDigest("job-42");
  h.nonce = 0x0123456789abcdefull;
  h.socketIndex = 3;
  h.nSockets = 5;
  h.chunkBytes = 512u << 10;
  h.pid = 4242;
  std::strcpy(h.hostname, "node-17");
  return h;
}

}  // namespace

TEST_CASE("listen handles round-trip within the handle size", "[transport][tcp][wire]") {
  STATIC_REQUIRE(kHandleBytes <= 64);
  STATIC_REQUIRE(kHandleBytes <= resilient::transport::kHandleSize);

  SECTION("IPv4") {
    ListenHandle h;
    h.family = AF_INET;
    h.port = 40000;
    const uint8_t ip[4] = {10, 0, 0, 2};
    std::memcpy(h.address, ip, 4);
    uint8_t bytes[kHandleBytes];
    encodeHandle(h, bytes);
    ListenHandle back;
    REQUIRE(decodeHandle(bytes, &back).ok());
    CHECK(back.family == AF_INET);
    CHECK(back.port == 40000);
    CHECK(std::memcmp(back.address, ip, 4) == 0);
  }
  SECTION("IPv6 with a scope") {
    ListenHandle h;
    h.family = AF_INET6;
    h.port = 1;
    for (int i = 0; i < 16; ++i) {
      h.address[i] = static_cast<uint8_t>(0xf0 + i);
    }
    h.scopeId = 7;
    uint8_t bytes[kHandleBytes];
    encodeHandle(h, bytes);
    ListenHandle back;
    REQUIRE(decodeHandle(bytes, &back).ok());
    CHECK(back.family == AF_INET6);
    CHECK(back.port == 1);
    CHECK(back.scopeId == 7);
    CHECK(std::memcmp(back.address, h.address, 16) == 0);
  }
}

TEST_CASE("listen handles with a bad magic, version, family or port are refused",
          "[transport][tcp][wire]") {
  ListenHandle h;
  h.family = AF_INET;
  h.port = 5000;
  uint8_t bytes[kHandleBytes];
  encodeHandle(h, bytes);
  ListenHandle out;

  uint8_t bad[kHandleBytes];
  std::memcpy(bad, bytes, sizeof bad);
  bad[0] ^= 0xff;
  Status s = decodeHandle(bad, &out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("magic"));

  std::memcpy(bad, bytes, sizeof bad);
  bad[4] = 99;  // version
  s = decodeHandle(bad, &out);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("version"));

  std::memcpy(bad, bytes, sizeof bad);
  bad[6] = 9;  // family
  CHECK_FALSE(decodeHandle(bad, &out).ok());

  std::memcpy(bad, bytes, sizeof bad);
  bad[8] = bad[9] = 0;  // port
  CHECK_FALSE(decodeHandle(bad, &out).ok());

  CHECK_FALSE(decodeHandle(nullptr, &out).ok());
  const uint8_t zeros[kHandleBytes] = {};
  CHECK_FALSE(decodeHandle(zeros, &out).ok());
}

TEST_CASE("hellos round-trip and are checked against the token", "[transport][tcp][wire]") {
  const Hello h = sampleHello();
  uint8_t bytes[kHelloBytes];
  encodeHello(h, bytes);
  Hello back;
  REQUIRE(decodeHello(bytes, tokenDigest("job-42"), &back) == Refusal::kNone);
  CHECK(back.nonce == h.nonce);
  CHECK(back.socketIndex == 3);
  CHECK(back.nSockets == 5);
  CHECK(back.chunkBytes == h.chunkBytes);
  CHECK(back.pid == 4242);
  CHECK(std::string(back.hostname) == "node-17");

  CHECK(decodeHello(bytes, tokenDigest("job-43"), &back) == Refusal::kBadToken);
  CHECK(decodeHello(bytes, 0, &back) == Refusal::kBadToken);
}

TEST_CASE("hellos with bad sizes, indices or versions are refused", "[transport][tcp][wire]") {
  const uint64_t digest = tokenDigest("job-42");
  Hello back;
  uint8_t bytes[kHelloBytes];
  auto encoded = [&](auto mutate) {
    Hello h = sampleHello();
    mutate(h);
    encodeHello(h, bytes);
    return decodeHello(bytes, digest, &back);
  };
  CHECK(encoded([](Hello& h) { h.socketIndex = 5; }) == Refusal::kBadHello);  // == nSockets
  CHECK(encoded([](Hello& h) {
          h.nSockets = 1;
          h.socketIndex = 0;
        }) == Refusal::kBadHello);
  CHECK(encoded([](Hello& h) { h.nSockets = kMaxSockets + 1; }) == Refusal::kBadHello);
  CHECK(encoded([](Hello& h) {
          h.nSockets = kMaxSockets;
          h.socketIndex = kMaxSockets - 1;
        }) == Refusal::kNone);
  CHECK(encoded([](Hello& h) { h.chunkBytes = 1; }) == Refusal::kBadHello);
  CHECK(encoded([](Hello& h) { h.chunkBytes = kMaxChunkBytes + 1; }) == Refusal::kBadHello);

  encodeHello(sampleHello(), bytes);
  bytes[4] = 2;  // version 2
  CHECK(decodeHello(bytes, digest, &back) == Refusal::kBadVersion);
}

TEST_CASE("hello prefixes reject garbage at the first wrong byte", "[transport][tcp][wire]") {
  uint8_t bytes[kHelloBytes];
  encodeHello(sampleHello(), bytes);
  Refusal reason = Refusal::kNone;
  bool ours = true;
  for (size_t n = 0; n <= kHelloBytes; ++n) {
    CAPTURE(n);
    CHECK(checkHelloPrefix(bytes, n, &reason, &ours));
  }
  const uint8_t http[] = {'G', 'E', 'T', ' '};
  CHECK_FALSE(checkHelloPrefix(http, 1, &reason, &ours));
  CHECK_FALSE(ours);
  uint8_t wrongVersion[kHelloBytes];
  std::memcpy(wrongVersion, bytes, sizeof wrongVersion);
  wrongVersion[5] = 1;
  CHECK(checkHelloPrefix(wrongVersion, 5, &reason, &ours));  // version not complete yet
  CHECK_FALSE(checkHelloPrefix(wrongVersion, 6, &reason, &ours));
  CHECK(ours);
  CHECK(reason == Refusal::kBadVersion);
}

TEST_CASE("hostnames are bounded and sanitised", "[transport][tcp][wire]") {
  uint8_t bytes[kHelloBytes];
  encodeHello(sampleHello(), bytes);
  // A hostile peer: no terminating NUL, control characters.
  for (size_t i = kHelloBytes - kHostnameBytes; i < kHelloBytes; ++i) {
    bytes[i] = (i % 2) != 0 ? 'a' : '\n';
  }
  Hello back;
  REQUIRE(decodeHello(bytes, tokenDigest("job-42"), &back) == Refusal::kNone);
  const std::string host = back.hostname;
  CHECK(host.size() == kHostnameBytes - 1);
  CHECK(host.find('\n') == std::string::npos);
}

TEST_CASE("acks round-trip and junk is not an ack", "[transport][tcp][wire]") {
  uint8_t bytes[kAckBytes];
  encodeAck(Ack{kProtocolVersion, Refusal::kBadToken, 99}, bytes);
  Ack back;
  REQUIRE(decodeAck(bytes, &back));
  CHECK(back.refusal == Refusal::kBadToken);
  CHECK(back.pid == 99);
  CHECK(back.version == kProtocolVersion);
  bytes[1] ^= 0x55;
  CHECK_FALSE(decodeAck(bytes, &back));
  CHECK(std::string(refusalName(Refusal::kBadToken)) == "job token mismatch");
  CHECK(std::string(refusalName(static_cast<Refusal>(77))) == "unknown refusal code");
}

TEST_CASE("frame headers round-trip; bad magic, version, flags and sizes are refused",
          "[transport][tcp][wire]") {
  uint8_t bytes[kFrameHeaderBytes];
  FrameHeader f{-7, kFrameInline, 12345};
  encodeFrame(f, bytes);
  FrameHeader back;
  REQUIRE(decodeFrame(bytes, &back) == FrameError::kNone);
  CHECK(back.tag == -7);
  CHECK(back.flags == kFrameInline);
  CHECK(back.size == 12345);

  encodeFrame(FrameHeader{1, 0, kMaxMessageBytes}, bytes);
  CHECK(decodeFrame(bytes, &back) == FrameError::kNone);
  encodeFrame(FrameHeader{1, 0, kMaxMessageBytes + 1}, bytes);
  CHECK(decodeFrame(bytes, &back) == FrameError::kTooLarge);

  encodeFrame(FrameHeader{1, 0, 1}, bytes);
  uint8_t bad[kFrameHeaderBytes];
  std::memcpy(bad, bytes, sizeof bad);
  bad[0] ^= 1;
  CHECK(decodeFrame(bad, &back) == FrameError::kBadMagic);
  std::memcpy(bad, bytes, sizeof bad);
  bad[2] = 9;
  CHECK(decodeFrame(bad, &back) == FrameError::kBadVersion);
  std::memcpy(bad, bytes, sizeof bad);
  bad[3] = 0x80;
  CHECK(decodeFrame(bad, &back) == FrameError::kBadFlags);
  CHECK(std::string(frameErrorName(FrameError::kTooLarge)).find("1 GiB") != std::string::npos);
}
