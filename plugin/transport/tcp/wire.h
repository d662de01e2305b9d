// The TCP transport's wire formats: the listen handle NCCL exchanges out of
// band, the per-socket handshake (Hello, Challenge, Response, Ack) and the
// frame header that precedes every message on the control socket. Every
// structure starts with a magic and a version; every field is encoded
// little-endian at a fixed offset, so nothing depends on struct layout.
//
// Decoders never trust their input: they check the magic, the version, every
// size and index, and return a reason when they refuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/job_auth.h"
#include "common/status.h"
#include "plugin/transport/tcp/options.h"

namespace resilient::transport::tcp {

// 2: the job token is proven by a challenge-response (version 1 sent a digest).
inline constexpr uint16_t kProtocolVersion = 2;

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
void encodeHandle(const ListenHandle& handle, std::byte* out) noexcept;
// invalidUsage when the bytes are not a handle of this protocol version.
Status decodeHandle(const std::byte* in, ListenHandle* handle);

// ---- Handshake ----------------------------------------------------------------
//
// Per socket, a mutual challenge-response over the job token (common/job_auth.h):
//
//   connector -> listener   Hello      its fresh nonce and what it asks for
//   listener  -> connector  Challenge  the listener's fresh nonce and proof, or an early refusal
//   connector -> listener   Response   the connector's proof, or "your proof failed"
//   listener  -> connector  Ack        accepted, or why not
//
// Each side proves over both nonces and the bytes exchanged before its proof
// (handshake_proof.h), so nothing on the wire is derived from the token alone
// and no recorded proof is ever valid again.

inline constexpr uint32_t kHelloMagic = 0x4C485452;  // "RTHL"
// Version 1's ack magic: a version-1 connector reads a refusal's code and
// version from the first kChallengeHeaderBytes (their offsets never change).
inline constexpr uint32_t kChallengeMagic = 0x4B415452;  // "RTAK"
inline constexpr uint32_t kResponseMagic = 0x53525452;   // "RTRS"
inline constexpr uint32_t kAckMagic = 0x41465452;        // "RTFA"
inline constexpr size_t kHelloBytes = 108;
inline constexpr size_t kChallengeHeaderBytes = 12;  // magic, version, code, pid
inline constexpr size_t kChallengeBytes = 60;
inline constexpr size_t kResponseBytes = 40;
inline constexpr size_t kAckBytes = 8;
inline constexpr size_t kHostnameBytes = 64;  // NUL included

// Sent by the connector on every socket of a connection.
struct Hello {
  auth::Nonce authNonce{};   // fresh for every socket: each socket authenticates itself
  uint64_t nonce = 0;        // random; the same on every socket of one connection
  uint16_t socketIndex = 0;  // 0: control socket, 1..: data sockets
  uint16_t nSockets = 0;     // sockets of the connection, control included
  uint32_t chunkBytes = 0;   // striping chunk of the connection
  uint32_t pid = 0;
  char hostname[kHostnameBytes] = {};  // always NUL-terminated after decode
};

// Why a listener refuses a socket (the code of a Challenge or an Ack).
enum class Refusal : uint16_t {
  kNone = 0,        // accepted
  kBadVersion = 1,  // protocol version mismatch
  kBadToken = 2,    // the connector could not prove the job token
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

// Decodes a complete hello. Returns kNone when its fields are acceptable;
// whether it comes from the job is for the proofs to tell.
Refusal decodeHello(const uint8_t* in, Hello* hello) noexcept;

// The listener's first answer. An early refusal (version, sizes) carries a
// code and no proof; an acceptance carries the listener's nonce and proof.
struct Challenge {
  uint16_t version = kProtocolVersion;  // the listener's protocol version
  Refusal refusal = Refusal::kNone;     // may hold a code this version does not know
  uint32_t pid = 0;                     // the listener's
  auth::Nonce nonce{};
  auth::Proof proof{};
};

// The listener's proof covers the challenge's bytes before it.
inline constexpr size_t kChallengeProofAt = kChallengeBytes - auth::kProofBytes;

void encodeChallenge(const Challenge& challenge, uint8_t* out) noexcept;  // kChallengeBytes
// Decodes the first kChallengeHeaderBytes: version, code and pid. False when
// the magic is not a challenge's. Any version decodes: the connector checks
// the version and the code, and the listener's proof (handshake_proof.h)
// over the rest.
bool decodeChallengeHeader(const uint8_t* in, Challenge* challenge) noexcept;

// What the connector makes of the listener's proof.
enum class Verdict : uint16_t {
  kProven = 0,     // it holds; the connector's own proof follows
  kNotProven = 1,  // it failed: the connector gives up, with no proof of its own
};

struct Response {
  Verdict verdict = Verdict::kProven;
  auth::Proof proof{};  // the connector's; zero unless kProven
};

void encodeResponse(const Response& response, uint8_t* out) noexcept;  // kResponseBytes
// False unless the magic, this version and a known verdict.
bool decodeResponse(const uint8_t* in, Response* response) noexcept;

// The listener's final answer: kNone, or why it refuses the socket after its
// response: kBadToken (the proof failed), kDuplicate or kBadHello (the
// authenticated hello does not fit the other sockets of its connection).
struct Ack {
  Refusal refusal = Refusal::kNone;
};

void encodeAck(const Ack& ack, uint8_t* out) noexcept;  // kAckBytes
// False unless the magic, this version and a known code.
bool decodeAck(const uint8_t* in, Ack* ack) noexcept;

// The nonces in an encoded hello and challenge (the proofs are made over the
// bytes as they travelled).
auth::Nonce helloAuthNonce(const uint8_t* hello) noexcept;
auth::Nonce challengeNonce(const uint8_t* challenge) noexcept;

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
