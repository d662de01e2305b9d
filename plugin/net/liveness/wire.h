// The wire format of the liveness channel between the net plugins of two
// processes: frames of a header (magic, version, type, payload length) and a
// small payload, their encoding and an incremental decoder. Every frame is
// checked; a peer that sends anything else is dropped.
//
// Threads: pure functions, and one decoder per link, used by the liveness
// channel with the watchdog's mutex held.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/job_auth.h"

namespace resilient::net::liveness {

inline constexpr uint32_t kMagic = 0x52534c56;  // "RSLV"
// 2: fault notices name their communicator; 3: mutual challenge-response.
inline constexpr uint16_t kVersion = 3;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 512;
inline constexpr size_t kMaxHostName = 255;
inline constexpr size_t kMaxGoodbyeDetail = 200;

enum class Type : uint16_t {
  kHello = 1,      // opener -> acceptor, first: its nonce, pid, host name
  kBind = 2,       // opener -> acceptor: "my connection to your (listen or connection) key N uses
                   // this link"
  kPing = 3,       // sent while requests to the peer are outstanding
  kPong = 4,       // answer to a ping, from the peer's watchdog thread
  kGoodbye = 5,    // we close: the EOF that follows is not a fault; may say why (a fault)
  kRefused = 6,    // the peer's proof of the job token failed; the link closes
  kFault = 7,      // the sender detected a fault in communicator commId (its reason, as in a
                   // goodbye); the link stays, the sender's side of that communicator goes
  kChallenge = 8,  // acceptor -> opener, answering the hello: its nonce, pid, host, its proof
  kProof = 9,      // opener -> acceptor: its proof; the link is authenticated both ways
};

// The label and transcript the proofs of a link vouch for (common/job_auth.h):
// both nonces, and who each side said it is.
inline constexpr std::string_view kAuthProtocol = "resilient-liveness-v3";
std::string authTranscript(uint32_t openerPid, const std::string& openerHost, uint32_t acceptorPid,
                           const std::string& acceptorHost);

// A reason, in a goodbye when the sender closes because of a fault and in a
// fault notice: value is the FaultClass + 1 (0, goodbye only: a plain close,
// and no payload at all), pid and host the fault's culprit, detail a short
// explanation.
struct Frame {
  Type type = Type::kPing;
  uint64_t value = 0;   // kBind: key; kPing/kPong: sequence
  uint32_t pid = 0;     // kHello, kChallenge, kGoodbye, kFault
  std::string host;     // kHello, kChallenge, kGoodbye, kFault
  std::string detail;   // kGoodbye, kFault
  uint64_t commId = 0;  // kFault: the communicator the fault was detected in (NCCL's comm hash)
  auth::Nonce nonce{};  // kHello, kChallenge: the sender's
  auth::Proof proof{};  // kChallenge, kProof: the sender's proof of the job token
};

inline Frame makeFrame(Type type, uint64_t value = 0) {
  Frame f;
  f.type = type;
  f.value = value;
  return f;
}
inline Frame makeHello(const auth::Nonce& nonce, uint32_t pid, std::string host) {
  Frame f = makeFrame(Type::kHello);
  f.nonce = nonce;
  f.pid = pid;
  f.host = std::move(host);
  return f;
}
inline Frame makeChallenge(const auth::Nonce& nonce, uint32_t pid, std::string host,
                           const auth::Proof& proof) {
  Frame f = makeHello(nonce, pid, std::move(host));
  f.type = Type::kChallenge;
  f.proof = proof;
  return f;
}
inline Frame makeProof(const auth::Proof& proof) {
  Frame f = makeFrame(Type::kProof);
  f.proof = proof;
  return f;
}

inline Frame makeGoodbye(uint64_t reasonValue = 0, uint32_t pid = 0, std::string host = {},
                         std::string detail = {}) {
  Frame f = makeFrame(Type::kGoodbye, reasonValue);
  f.pid = pid;
  f.host = std::move(host);
  f.detail = std::move(detail);
  return f;
}

inline Frame makeFaultNotice(uint64_t reasonValue, uint32_t pid, std::string host,
                             std::string detail, uint64_t commId) {
  Frame f = makeGoodbye(reasonValue, pid, std::move(host), std::move(detail));
  f.type = Type::kFault;
  f.commId = commId;
  return f;
}

void encode(const Frame& frame, std::string* out);

// Incremental decoder over a byte stream.
class Decoder {
 public:
  enum class Result { kFrame, kNeedMore, kError };
  void feed(const char* data, size_t n) { buffer_.append(data, n); }
  // Extracts the next frame; on kError, *error says why.
  Result next(Frame* frame, std::string* error);

 private:
  std::string buffer_;
};

// How reading a link's socket ended (readFrames).
enum class ReadEnd {
  kDrained,      // nothing more for now
  kStopped,      // onFrame said stop
  kEndOfStream,  // recv returned 0 (*error 0) or failed (*error: its errno)
  kInvalid,      // the peer sent what is no frame (*invalid: why)
};

// Reads what the non-blocking stream socket `fd` holds through `decoder`
// and hands each whole frame to `onFrame` (bool(const Frame&); false: stop
// now). The one read loop of the liveness channel's links and of a stream
// link (stream_link.h).
template <class OnFrame>
ReadEnd readFrames(int fd, Decoder& decoder, int* error, std::string* invalid, OnFrame&& onFrame) {
  std::array<char, 4096> buf{};
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      decoder.feed(buf.data(), static_cast<size_t>(n));
      Frame frame;
      for (;;) {
        const Decoder::Result r = decoder.next(&frame, invalid);
        if (r == Decoder::Result::kNeedMore) {
          break;
        }
        if (r == Decoder::Result::kError) {
          return ReadEnd::kInvalid;
        }
        if (!onFrame(static_cast<const Frame&>(frame))) {
          return ReadEnd::kStopped;
        }
      }
      continue;
    }
    const int err = n < 0 ? errno : 0;
    if (err == EINTR) {
      continue;
    }
    if (err == EAGAIN || err == EWOULDBLOCK) {
      return ReadEnd::kDrained;
    }
    *error = err;
    return ReadEnd::kEndOfStream;
  }
}

}  // namespace resilient::net::liveness
