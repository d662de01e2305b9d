#include <sys/socket.h>

#include <cstddef>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "common/little_endian.h"
#include "plugin/transport/tcp/handshake_proof.h"
#include "plugin/transport/tcp/wire.h"
#include "plugin/transport/transport.h"

using namespace resilient;
using namespace resilient::transport::tcp;

namespace {

Hello sampleHello() {
  Hello h;
  for (size_t i = 0; i < h.authNonce.size(); ++i) {
    h.authNonce[i] = static_cast<uint8_t>(0xa0 + i);
  }
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
    std::byte bytes[kHandleBytes];
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
    std::byte bytes[kHandleBytes];
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
  std::byte bytes[kHandleBytes];
  encodeHandle(h, bytes);
  ListenHandle out;

  std::byte bad[kHandleBytes];
  std::memcpy(bad, bytes, sizeof bad);
  bad[0] ^= std::byte{0xff};
  Status s = decodeHandle(bad, &out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("magic"));

  std::memcpy(bad, bytes, sizeof bad);
  bad[4] = std::byte{99};  // version
  s = decodeHandle(bad, &out);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("version"));

  std::memcpy(bad, bytes, sizeof bad);
  bad[6] = std::byte{9};  // family
  CHECK_FALSE(decodeHandle(bad, &out).ok());

  std::memcpy(bad, bytes, sizeof bad);
  bad[8] = bad[9] = std::byte{0};  // port
  CHECK_FALSE(decodeHandle(bad, &out).ok());

  CHECK_FALSE(decodeHandle(nullptr, &out).ok());
  const std::byte zeros[kHandleBytes] = {};
  CHECK_FALSE(decodeHandle(zeros, &out).ok());
}

TEST_CASE("hellos round-trip", "[transport][tcp][wire]") {
  const Hello h = sampleHello();
  uint8_t bytes[kHelloBytes];
  encodeHello(h, bytes);
  Hello back;
  REQUIRE(decodeHello(bytes, &back) == Refusal::kNone);
  CHECK(back.authNonce == h.authNonce);
  CHECK(helloAuthNonce(bytes) == h.authNonce);
  CHECK(back.nonce == h.nonce);
  CHECK(back.socketIndex == 3);
  CHECK(back.nSockets == 5);
  CHECK(back.chunkBytes == h.chunkBytes);
  CHECK(back.pid == 4242);
  CHECK(std::string(back.hostname) == "node-17");
}

TEST_CASE("hellos with bad sizes, indices, magics or versions are refused",
          "[transport][tcp][wire]") {
  Hello back;
  uint8_t bytes[kHelloBytes];
  auto encoded = [&](auto mutate) {
    Hello h = sampleHello();
    mutate(h);
    encodeHello(h, bytes);
    return decodeHello(bytes, &back);
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
  bytes[4] = 1;  // version 1: the token digest's protocol
  CHECK(decodeHello(bytes, &back) == Refusal::kBadVersion);
  bytes[4] = 3;
  CHECK(decodeHello(bytes, &back) == Refusal::kBadVersion);
  encodeHello(sampleHello(), bytes);
  bytes[0] ^= 0xff;
  CHECK(decodeHello(bytes, &back) == Refusal::kBadHello);
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
  wrongVersion[5] = 1;                                       // version 0x102
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
  REQUIRE(decodeHello(bytes, &back) == Refusal::kNone);
  const std::string host = back.hostname;
  CHECK(host.size() == kHostnameBytes - 1);
  CHECK(host.find('\n') == std::string::npos);
}

TEST_CASE("challenges round-trip; their header is version 1's ack", "[transport][tcp][wire]") {
  Challenge c;
  c.pid = 99;
  for (size_t i = 0; i < c.nonce.size(); ++i) {
    c.nonce[i] = static_cast<uint8_t>(i + 1);
  }
  for (size_t i = 0; i < c.proof.size(); ++i) {
    c.proof[i] = static_cast<uint8_t>(0x80 + i);
  }
  uint8_t bytes[kChallengeBytes];
  encodeChallenge(c, bytes);
  Challenge back;
  REQUIRE(decodeChallengeHeader(bytes, &back));
  CHECK(back.version == kProtocolVersion);
  CHECK(back.refusal == Refusal::kNone);
  CHECK(back.pid == 99);
  CHECK(challengeNonce(bytes) == c.nonce);
  CHECK(std::memcmp(bytes + kChallengeProofAt, c.proof.data(), auth::kProofBytes) == 0);

  // A version-1 connector reads its ack's magic, version and code here.
  c.refusal = Refusal::kBadVersion;
  encodeChallenge(c, bytes);
  CHECK(getU32(bytes) == 0x4B415452);  // version 1's "RTAK"
  CHECK(getU16(bytes + 4) == kProtocolVersion);
  CHECK(getU16(bytes + 6) == static_cast<uint16_t>(Refusal::kBadVersion));
  CHECK(getU32(bytes + 8) == 99);

  // Another version's header decodes (its code and version are reported).
  putU16(bytes + 4, 7);
  putU16(bytes + 6, 77);
  REQUIRE(decodeChallengeHeader(bytes, &back));
  CHECK(back.version == 7);
  CHECK(back.refusal == static_cast<Refusal>(77));

  bytes[2] ^= 0x10;
  CHECK_FALSE(decodeChallengeHeader(bytes, &back));
  uint8_t ack[kChallengeBytes] = {};
  encodeAck(Ack{Refusal::kNone}, ack);
  CHECK_FALSE(decodeChallengeHeader(ack, &back));  // an ack is not a challenge
}

TEST_CASE("responses round-trip; bad magic, version or verdict are refused",
          "[transport][tcp][wire]") {
  Response r;
  for (size_t i = 0; i < r.proof.size(); ++i) {
    r.proof[i] = static_cast<uint8_t>(i * 7);
  }
  uint8_t bytes[kResponseBytes];
  encodeResponse(r, bytes);
  Response back;
  REQUIRE(decodeResponse(bytes, &back));
  CHECK(back.verdict == Verdict::kProven);
  CHECK(back.proof == r.proof);
  encodeResponse(Response{Verdict::kNotProven, {}}, bytes);
  REQUIRE(decodeResponse(bytes, &back));
  CHECK(back.verdict == Verdict::kNotProven);

  uint8_t bad[kResponseBytes];
  std::memcpy(bad, bytes, sizeof bad);
  bad[0] ^= 1;
  CHECK_FALSE(decodeResponse(bad, &back));
  std::memcpy(bad, bytes, sizeof bad);
  bad[4] = 1;  // version
  CHECK_FALSE(decodeResponse(bad, &back));
  std::memcpy(bad, bytes, sizeof bad);
  bad[6] = 2;  // verdict
  CHECK_FALSE(decodeResponse(bad, &back));
  uint8_t hello[kHelloBytes];
  encodeHello(sampleHello(), hello);
  CHECK_FALSE(decodeResponse(hello, &back));  // a replayed hello is not a response
}

TEST_CASE("acks round-trip; bad magic, version or codes that are no verdict are refused",
          "[transport][tcp][wire]") {
  uint8_t bytes[kAckBytes];
  Ack back;
  for (const Refusal code :
       {Refusal::kNone, Refusal::kBadToken, Refusal::kBadHello, Refusal::kDuplicate}) {
    CAPTURE(static_cast<int>(code));
    encodeAck(Ack{code}, bytes);
    REQUIRE(decodeAck(bytes, &back));
    CHECK(back.refusal == code);
  }
  for (const auto code : {Refusal::kBadVersion, Refusal::kBusy, static_cast<Refusal>(77)}) {
    CAPTURE(static_cast<int>(code));
    encodeAck(Ack{code}, bytes);
    CHECK_FALSE(decodeAck(bytes, &back));  // early refusals travel in a challenge
  }
  encodeAck(Ack{Refusal::kNone}, bytes);
  uint8_t bad[kAckBytes];
  std::memcpy(bad, bytes, sizeof bad);
  bad[1] ^= 0x55;
  CHECK_FALSE(decodeAck(bad, &back));
  std::memcpy(bad, bytes, sizeof bad);
  bad[4] = 1;  // version
  CHECK_FALSE(decodeAck(bad, &back));
  CHECK(std::string(refusalName(Refusal::kBadToken)) == "job token mismatch");
  CHECK(std::string(refusalName(static_cast<Refusal>(77))) == "unknown refusal code");
}

TEST_CASE("handshake proofs hold only for the same token, bytes and role",
          "[transport][tcp][wire]") {
  uint8_t hello[kHelloBytes];
  encodeHello(sampleHello(), hello);
  Challenge c;
  c.pid = 7;
  c.nonce = auth::freshNonce();
  uint8_t challenge[kChallengeBytes];
  encodeChallenge(c, challenge);
  const HandshakeSecret secret("job-42");
  c.proof = secret.listenerProof(hello, challenge);
  encodeChallenge(c, challenge);
  CHECK(secret.listenerProofHolds(hello, challenge));
  CHECK_FALSE(HandshakeSecret("job-43").listenerProofHolds(hello, challenge));
  CHECK_FALSE(HandshakeSecret("").listenerProofHolds(hello, challenge));

  const auth::Proof connector = secret.connectorProof(hello, challenge);
  CHECK(secret.connectorProofHolds(hello, challenge, connector));
  CHECK_FALSE(HandshakeSecret("job-43").connectorProofHolds(hello, challenge, connector));
  // No reflection: the listener's proof is no connector's proof, and back.
  CHECK_FALSE(secret.connectorProofHolds(hello, challenge, c.proof));
  CHECK(connector != c.proof);

  SECTION("every byte of the hello counts") {
    for (size_t i = 0; i < kHelloBytes; i += 13) {
      CAPTURE(i);
      uint8_t other[kHelloBytes];
      std::memcpy(other, hello, sizeof other);
      other[i] ^= 1;
      CHECK_FALSE(secret.listenerProofHolds(other, challenge));
      CHECK_FALSE(secret.connectorProofHolds(other, challenge, connector));
    }
  }
  SECTION("so does the challenge: its nonce, its pid, the listener's proof") {
    for (const size_t i : {size_t{8}, size_t{12}, kChallengeProofAt - 1, kChallengeBytes - 1}) {
      CAPTURE(i);
      uint8_t other[kChallengeBytes];
      std::memcpy(other, challenge, sizeof other);
      other[i] ^= 1;
      CHECK_FALSE(secret.connectorProofHolds(hello, other, connector));
    }
  }
  SECTION("a fresh listener nonce makes an old proof worthless") {
    c.nonce = auth::freshNonce();
    encodeChallenge(c, challenge);
    CHECK_FALSE(secret.listenerProofHolds(hello, challenge));
    CHECK_FALSE(secret.connectorProofHolds(hello, challenge, connector));
  }
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
