#include "plugin/transport/tcp/wire.h"

#include <sys/socket.h>

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
constexpr size_t kHelloTokenAt = 8;
constexpr size_t kHelloNonceAt = 16;
constexpr size_t kHelloIndexAt = 24;
constexpr size_t kHelloCountAt = 26;
constexpr size_t kHelloChunkAt = 28;
constexpr size_t kHelloPidAt = 32;
constexpr size_t kHelloHostAt = 40;
static_assert(kHelloHostAt + kHostnameBytes == kHelloBytes);

// Ack layout.
constexpr size_t kAckMagicAt = 0;
constexpr size_t kAckVersionAt = 4;
constexpr size_t kAckCodeAt = 6;
constexpr size_t kAckPidAt = 8;
static_assert(kAckPidAt + 4 <= kAckBytes);

// Frame layout.
constexpr size_t kFrameMagicAt = 0;
constexpr size_t kFrameVersionAt = 2;
constexpr size_t kFrameFlagsAt = 3;
constexpr size_t kFrameTagAt = 4;
constexpr size_t kFrameSizeAt = 8;
static_assert(kFrameSizeAt + 8 == kFrameHeaderBytes);

constexpr uint8_t kKnownFrameFlags = kFrameInline;

}  // namespace

void encodeHandle(const ListenHandle& handle, void* out) noexcept {
  auto* p = static_cast<uint8_t*>(out);
  std::memset(p, 0, kHandleBytes);
  putU32(p + kHandleMagicAt, kHandleMagic);
  putU16(p + kHandleVersionAt, kProtocolVersion);
  putU16(p + kHandleFamilyAt, handle.family == AF_INET6 ? kWireInet6 : kWireInet);
  putU16(p + kHandlePortAt, handle.port);
  putU32(p + kHandleScopeAt, handle.scopeId);
  std::memcpy(p + kHandleAddressAt, handle.address, sizeof handle.address);
}

Status decodeHandle(const void* in, ListenHandle* handle) {
  if (in == nullptr) {
    return invalidUsage("tcp: null listen handle");
  }
  const auto* p = static_cast<const uint8_t*>(in);
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
  putU64(out + kHelloTokenAt, hello.tokenDigest);
  putU64(out + kHelloNonceAt, hello.nonce);
  putU16(out + kHelloIndexAt, hello.socketIndex);
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

Refusal decodeHello(const uint8_t* in, uint64_t expectedTokenDigest, Hello* hello) noexcept {
  Refusal reason = Refusal::kNone;
  bool isOurs = true;
  if (!checkHelloPrefix(in, kHelloBytes, &reason, &isOurs)) {
    return isOurs ? reason : Refusal::kBadHello;
  }
  Hello h;
  h.tokenDigest = getU64(in + kHelloTokenAt);
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
  if (h.tokenDigest != expectedTokenDigest) {
    return Refusal::kBadToken;
  }
  if (h.nSockets < 2 || h.nSockets > kMaxSockets || h.socketIndex >= h.nSockets) {
    return Refusal::kBadHello;
  }
  if (h.chunkBytes < kMinChunkBytes || h.chunkBytes > kMaxChunkBytes) {
    return Refusal::kBadHello;
  }
  return Refusal::kNone;
}

void encodeAck(const Ack& ack, uint8_t* out) noexcept {
  std::memset(out, 0, kAckBytes);
  putU32(out + kAckMagicAt, kAckMagic);
  putU16(out + kAckVersionAt, ack.version);
  putU16(out + kAckCodeAt, static_cast<uint16_t>(ack.refusal));
  putU32(out + kAckPidAt, ack.pid);
}

bool decodeAck(const uint8_t* in, Ack* ack) noexcept {
  if (getU32(in + kAckMagicAt) != kAckMagic) {
    return false;
  }
  ack->version = getU16(in + kAckVersionAt);
  ack->refusal = static_cast<Refusal>(getU16(in + kAckCodeAt));
  ack->pid = getU32(in + kAckPidAt);
  return true;
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
