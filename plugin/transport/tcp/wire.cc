#include "plugin/transport/tcp/wire.h"

#include <sys/socket.h>

#include <array>
#include <cstring>

#include "common/little_endian.h"

namespace resilient::transport::tcp {
namespace {

// Address family codes on the wire (independent of the OS's AF_* values).
constexpr uint16_t kWireInet = 4;
constexpr uint16_t kWireInet6 = 6;

// Handle layout.
constexpr size_t kHandleMagicAt = 0;
constexpr size_t kHandleVersionAt = 4;
constexpr size_t kHandleFamilyAt = 6;
constexpr size_t kHandlePortAt = 8;
constexpr size_t kHandleScopeAt = 12;
constexpr size_t kHandleAddressAt = 16;
static_assert(kHandleAddressAt + 16 <= kHandleBytes);

// Hello layout.
constexpr size_t kHelloMagicAt = 0;
constexpr size_t kHelloVersionAt = 4;
constexpr size_t kHelloIndexAt = 6;
constexpr size_t kHelloNonceAt = 8;
constexpr size_t kHelloAuthNonceAt = 16;
constexpr size_t kHelloCountAt = 32;
constexpr size_t kHelloChunkAt = 36;
constexpr size_t kHelloPidAt = 40;
constexpr size_t kHelloHostAt = 44;
static_assert(kHelloAuthNonceAt + auth::kNonceBytes == kHelloCountAt);
static_assert(kHelloHostAt + kHostnameBytes == kHelloBytes);

// Challenge layout: the header's offsets are version 1's ack's.
constexpr size_t kChallengeMagicAt = 0;
constexpr size_t kChallengeVersionAt = 4;
constexpr size_t kChallengeCodeAt = 6;
constexpr size_t kChallengePidAt = 8;
constexpr size_t kChallengeNonceAt = 12;
static_assert(kChallengePidAt + 4 == kChallengeHeaderBytes);
static_assert(kChallengeHeaderBytes == kChallengeNonceAt);
static_assert(kChallengeNonceAt + auth::kNonceBytes == kChallengeProofAt);

// Response layout.
constexpr size_t kResponseMagicAt = 0;
constexpr size_t kResponseVersionAt = 4;
constexpr size_t kResponseVerdictAt = 6;
constexpr size_t kResponseProofAt = 8;
static_assert(kResponseProofAt + auth::kProofBytes == kResponseBytes);

// Ack layout.
constexpr size_t kAckMagicAt = 0;
constexpr size_t kAckVersionAt = 4;
constexpr size_t kAckCodeAt = 6;
static_assert(kAckCodeAt + 2 == kAckBytes);

// Frame layout.
constexpr size_t kFrameMagicAt = 0;
constexpr size_t kFrameVersionAt = 2;
constexpr size_t kFrameFlagsAt = 3;
constexpr size_t kFrameTagAt = 4;
constexpr size_t kFrameSizeAt = 8;
static_assert(kFrameSizeAt + 8 == kFrameHeaderBytes);

constexpr uint8_t kKnownFrameFlags = kFrameInline;

template <size_t N>
std::array<uint8_t, N> getBytes(const uint8_t* p) noexcept {
  std::array<uint8_t, N> out{};
  std::memcpy(out.data(), p, N);
  return out;
}

}  // namespace

void encodeHandle(const ListenHandle& handle, std::byte* out) noexcept {
  auto* p = reinterpret_cast<uint8_t*>(out);
  std::memset(p, 0, kHandleBytes);
  putU32(p + kHandleMagicAt, kHandleMagic);
  putU16(p + kHandleVersionAt, kProtocolVersion);
  putU16(p + kHandleFamilyAt, handle.family == AF_INET6 ? kWireInet6 : kWireInet);
  putU16(p + kHandlePortAt, handle.port);
  putU32(p + kHandleScopeAt, handle.scopeId);
  std::memcpy(p + kHandleAddressAt, handle.address, sizeof handle.address);
}

Status decodeHandle(const std::byte* in, ListenHandle* handle) {
  if (in == nullptr) {
    return invalidUsage("tcp: null listen handle");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(in);
  if (getU32(p + kHandleMagicAt) != kHandleMagic) {
    return invalidUsage("tcp: the listen handle is not a resilient TCP handle (bad magic)");
  }
  const uint16_t version = getU16(p + kHandleVersionAt);
  if (version != kProtocolVersion) {
    return invalidUsage("tcp: listen handle of protocol version " + std::to_string(version) +
                        ", this side speaks version " + std::to_string(kProtocolVersion));
  }
  ListenHandle h;
  const uint16_t family = getU16(p + kHandleFamilyAt);
  if (family == kWireInet) {
    h.family = AF_INET;
  } else if (family == kWireInet6) {
    h.family = AF_INET6;
  } else {
    return invalidUsage("tcp: listen handle with unknown address family " + std::to_string(family));
  }
  h.port = getU16(p + kHandlePortAt);
  if (h.port == 0) {
    return invalidUsage("tcp: listen handle with port 0");
  }
  h.scopeId = getU32(p + kHandleScopeAt);
  std::memcpy(h.address, p + kHandleAddressAt, sizeof h.address);
  *handle = h;
  return {};
}

const char* refusalName(Refusal refusal) noexcept {
  switch (refusal) {
    case Refusal::kNone: return "accepted";
    case Refusal::kBadVersion: return "protocol version mismatch";
    case Refusal::kBadToken: return "job token mismatch";
    case Refusal::kBadHello: return "malformed or inconsistent handshake";
    case Refusal::kDuplicate: return "duplicate socket";
    case Refusal::kBusy: return "listener busy";
  }
  return "unknown refusal code";
}

void encodeHello(const Hello& hello, uint8_t* out) noexcept {
  std::memset(out, 0, kHelloBytes);
  putU32(out + kHelloMagicAt, kHelloMagic);
  putU16(out + kHelloVersionAt, kProtocolVersion);
  putU16(out + kHelloIndexAt, hello.socketIndex);
  putU64(out + kHelloNonceAt, hello.nonce);
  std::memcpy(out + kHelloAuthNonceAt, hello.authNonce.data(), auth::kNonceBytes);
  putU16(out + kHelloCountAt, hello.nSockets);
  putU32(out + kHelloChunkAt, hello.chunkBytes);
  putU32(out + kHelloPidAt, hello.pid);
  const size_t len = strnlen(hello.hostname, kHostnameBytes - 1);
  std::memcpy(out + kHelloHostAt, hello.hostname, len);
}

bool checkHelloPrefix(const uint8_t* in, size_t size, Refusal* reason, bool* isOurs) noexcept {
  *reason = Refusal::kNone;
  *isOurs = true;
  // Compare the bytes of the magic that have arrived: garbage is refused at its first byte.
  uint8_t magic[4];
  putU32(magic, kHelloMagic);
  const size_t magicBytes = size < 4 ? size : 4;
  if (std::memcmp(in + kHelloMagicAt, magic, magicBytes) != 0) {
    *isOurs = false;
    return false;
  }
  if (size >= kHelloVersionAt + 2 && getU16(in + kHelloVersionAt) != kProtocolVersion) {
    *reason = Refusal::kBadVersion;
    return false;
  }
  return true;
}

Refusal decodeHello(const uint8_t* in, Hello* hello) noexcept {
  Refusal reason = Refusal::kNone;
  bool isOurs = true;
  if (!checkHelloPrefix(in, kHelloBytes, &reason, &isOurs)) {
    return isOurs ? reason : Refusal::kBadHello;
  }
  Hello h;
  h.authNonce = getBytes<auth::kNonceBytes>(in + kHelloAuthNonceAt);
  h.nonce = getU64(in + kHelloNonceAt);
  h.socketIndex = getU16(in + kHelloIndexAt);
  h.nSockets = getU16(in + kHelloCountAt);
  h.chunkBytes = getU32(in + kHelloChunkAt);
  h.pid = getU32(in + kHelloPidAt);
  for (size_t i = 0; i + 1 < kHostnameBytes; ++i) {
    const char c = static_cast<char>(in[kHelloHostAt + i]);
    if (c == '\0') {
      break;
    }
    // Only printable ASCII reaches a log line.
    h.hostname[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  *hello = h;
  if (h.nSockets < 2 || h.nSockets > kMaxSockets || h.socketIndex >= h.nSockets) {
    return Refusal::kBadHello;
  }
  if (h.chunkBytes < kMinChunkBytes || h.chunkBytes > kMaxChunkBytes) {
    return Refusal::kBadHello;
  }
  return Refusal::kNone;
}

void encodeChallenge(const Challenge& challenge, uint8_t* out) noexcept {
  putU32(out + kChallengeMagicAt, kChallengeMagic);
  putU16(out + kChallengeVersionAt, challenge.version);
  putU16(out + kChallengeCodeAt, static_cast<uint16_t>(challenge.refusal));
  putU32(out + kChallengePidAt, challenge.pid);
  std::memcpy(out + kChallengeNonceAt, challenge.nonce.data(), auth::kNonceBytes);
  std::memcpy(out + kChallengeProofAt, challenge.proof.data(), auth::kProofBytes);
}

bool decodeChallengeHeader(const uint8_t* in, Challenge* challenge) noexcept {
  if (getU32(in + kChallengeMagicAt) != kChallengeMagic) {
    return false;
  }
  challenge->version = getU16(in + kChallengeVersionAt);
  challenge->refusal = static_cast<Refusal>(getU16(in + kChallengeCodeAt));
  challenge->pid = getU32(in + kChallengePidAt);
  return true;
}

void encodeResponse(const Response& response, uint8_t* out) noexcept {
  putU32(out + kResponseMagicAt, kResponseMagic);
  putU16(out + kResponseVersionAt, kProtocolVersion);
  putU16(out + kResponseVerdictAt, static_cast<uint16_t>(response.verdict));
  std::memcpy(out + kResponseProofAt, response.proof.data(), auth::kProofBytes);
}

bool decodeResponse(const uint8_t* in, Response* response) noexcept {
  if (getU32(in + kResponseMagicAt) != kResponseMagic ||
      getU16(in + kResponseVersionAt) != kProtocolVersion) {
    return false;
  }
  const auto verdict = static_cast<Verdict>(getU16(in + kResponseVerdictAt));
  if (verdict != Verdict::kProven && verdict != Verdict::kNotProven) {
    return false;
  }
  response->verdict = verdict;
  response->proof = getBytes<auth::kProofBytes>(in + kResponseProofAt);
  return true;
}

void encodeAck(const Ack& ack, uint8_t* out) noexcept {
  putU32(out + kAckMagicAt, kAckMagic);
  putU16(out + kAckVersionAt, kProtocolVersion);
  putU16(out + kAckCodeAt, static_cast<uint16_t>(ack.refusal));
}

bool decodeAck(const uint8_t* in, Ack* ack) noexcept {
  if (getU32(in + kAckMagicAt) != kAckMagic || getU16(in + kAckVersionAt) != kProtocolVersion) {
    return false;
  }
  const auto refusal = static_cast<Refusal>(getU16(in + kAckCodeAt));
  switch (refusal) {
    case Refusal::kNone:
    case Refusal::kBadToken:
    case Refusal::kBadHello:
    case Refusal::kDuplicate: ack->refusal = refusal; return true;
    default: return false;  // not a verdict on an authenticated hello
  }
}

auth::Nonce helloAuthNonce(const uint8_t* hello) noexcept {
  return getBytes<auth::kNonceBytes>(hello + kHelloAuthNonceAt);
}

auth::Nonce challengeNonce(const uint8_t* challenge) noexcept {
  return getBytes<auth::kNonceBytes>(challenge + kChallengeNonceAt);
}

void encodeFrame(const FrameHeader& frame, uint8_t* out) noexcept {
  putU16(out + kFrameMagicAt, kFrameMagic);
  out[kFrameVersionAt] = kFrameVersion;
  out[kFrameFlagsAt] = frame.flags;
  putU32(out + kFrameTagAt, static_cast<uint32_t>(frame.tag));
  putU64(out + kFrameSizeAt, frame.size);
}

const char* frameErrorName(FrameError error) noexcept {
  switch (error) {
    case FrameError::kNone: return "ok";
    case FrameError::kBadMagic: return "bad frame magic";
    case FrameError::kBadVersion: return "bad frame version";
    case FrameError::kBadFlags: return "unknown frame flags";
    case FrameError::kTooLarge: return "message larger than 1 GiB";
  }
  return "unknown frame error";
}

FrameError decodeFrame(const uint8_t* in, FrameHeader* frame) noexcept {
  if (getU16(in + kFrameMagicAt) != kFrameMagic) {
    return FrameError::kBadMagic;
  }
  if (in[kFrameVersionAt] != kFrameVersion) {
    return FrameError::kBadVersion;
  }
  const uint8_t flags = in[kFrameFlagsAt];
  if ((flags & ~kKnownFrameFlags) != 0) {
    return FrameError::kBadFlags;
  }
  const uint64_t size = getU64(in + kFrameSizeAt);
  if (size > kMaxMessageBytes) {
    return FrameError::kTooLarge;
  }
  frame->flags = flags;
  frame->tag = static_cast<int32_t>(getU32(in + kFrameTagAt));
  frame->size = size;
  return FrameError::kNone;
}

}  // namespace resilient::transport::tcp
