// The TCP transport's wire formats: the listen handle NCCL exchanges out of
// band, the per-socket handshake (Hello from the connector, Ack from the
// listener) and the frame header that precedes every message on the control
// socket. Every structure starts with a magic and a version; every field is
// encoded little-endian at a fixed offset, so nothing depends on struct layout.
//
// Decoders never trust their input: they check the magic, the version, every
// size and index, and return a reason when they refuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "plugin/transport/tcp/options.h"

namespace resilient::transport::tcp {

inline constexpr uint16_t kProtocolVersion = 1;

// ---- Listen handle ------------------------------------------------------------

inline constexpr uint32_t kHandleMagic = 0x48435452;  // "RTCH"
inline constexpr size_t kHandleBytes = 32;

struct ListenHandle {
  int family = 0;  // AF_INET or AF_INET6
  uint16_t port = 0;
  uint8_t address[16] = {};  // IPv4: the first 4 bytes; network byte order
  uint32_t scopeId = 0;      // IPv6 link-local scope
};

// Writes kHandleBytes bytes.
void encodeHandle(const ListenHandle& handle, void* out) noexcept;
// invalidUsage when the bytes are not a handle of this protocol version.
Status decodeHandle(const void* in, ListenHandle* handle);

// ---- Handshake ----------------------------------------------------------------

inline constexpr uint32_t kHelloMagic = 0x4C485452;  // "RTHL"
inline constexpr uint32_t kAckMagic = 0x4B415452;    // "RTAK"
inline constexpr size_t kHelloBytes = 104;
inline constexpr size_t kAckBytes = 16;
inline constexpr size_t kHostnameBytes = 64;  // NUL included

// Sent by the connector on every socket of a connection.
struct Hello {
  uint64_t tokenDigest = 0;  // tokenDigest(jobToken), common/token_digest.h
  uint64_t nonce = 0;        // random; the same on every socket of one connection
  uint16_t socketIndex = 0;  // 0: control socket, 1..: data sockets
  uint16_t nSockets = 0;     // sockets of the connection, control included
  uint32_t chunkBytes = 0;   // striping chunk of the connection
  uint32_t pid = 0;
  char hostname[kHostnameBytes] = {};  // always NUL-terminated after decode
};

// Why a listener refuses a socket (the Ack's code).
enum class Refusal : uint16_t {
  kNone = 0,        // accepted
  kBadVersion = 1,  // protocol version mismatch
  kBadToken = 2,    // job token mismatch
  kBadHello = 3,    // a size or index out of range, or inconsistent with its connection
  kDuplicate = 4,   // a socket index that already arrived for this connection
  kBusy = 5,        // the listener has too many pending sockets
};

const char* refusalName(Refusal refusal) noexcept;

void encodeHello(const Hello& hello, uint8_t* out) noexcept;  // kHelloBytes

// Checks as much of a hello as has arrived (`size` bytes, possibly fewer than
// kHelloBytes). Returns false with *reason when what is there is already
// wrong; *isOurs is false when the magic is not ours (garbage: close without
// answering).
bool checkHelloPrefix(const uint8_t* in, size_t size, Refusal* reason, bool* isOurs) noexcept;

// Decodes a complete hello and validates it against the listener's token
// digest. Returns kNone when it is acceptable.
Refusal decodeHello(const uint8_t* in, uint64_t expectedTokenDigest, Hello* hello) noexcept;

struct Ack {
  uint16_t version = kProtocolVersion;  // the listener's protocol version
  Refusal refusal = Refusal::kNone;     // may hold a code this version does not know
  uint32_t pid = 0;                     // the listener's
};

void encodeAck(const Ack& ack, uint8_t* out) noexcept;  // kAckBytes
// False when the bytes are not an ack (bad magic). Any version decodes: the
// magic, version and code keep their offsets in every version.
bool decodeAck(const uint8_t* in, Ack* ack) noexcept;

// ---- Frames on the control socket ---------------------------------------------

inline constexpr uint16_t kFrameMagic = 0x4652;  // "RF"
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 16;
// Largest message (Properties::maxP2pBytes): test() reports sizes as int.
inline constexpr uint64_t kMaxMessageBytes = 1ull << 30;

inline constexpr uint8_t kFrameInline = 0x1;  // the payload follows on the control socket

struct FrameHeader {
  int32_t tag = 0;
  uint8_t flags = 0;
  uint64_t size = 0;
};

void encodeFrame(const FrameHeader& frame, uint8_t* out) noexcept;  // kFrameHeaderBytes

enum class FrameError {
  kNone,
  kBadMagic,
  kBadVersion,
  kBadFlags,
  kTooLarge,
};
const char* frameErrorName(FrameError error) noexcept;

FrameError decodeFrame(const uint8_t* in, FrameHeader* frame) noexcept;

}  // namespace resilient::transport::tcp
