// The wire format of the liveness channel between the net plugins of two
// processes: frames of a header (magic, version, type, payload length) and a
// small payload, their encoding and an incremental decoder. Every frame is
// checked; a peer that sends anything else is dropped.
//
// Threads: pure functions, and one decoder per link, used by the liveness
// channel with the watchdog's mutex held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace resilient::net::liveness {

inline constexpr uint32_t kMagic = 0x52534c56;  // "RSLV"
inline constexpr uint16_t kVersion = 2;  // 2: fault notices name their communicator
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 512;
inline constexpr size_t kMaxHostName = 255;
inline constexpr size_t kMaxGoodbyeDetail = 200;

enum class Type : uint16_t {
  kHello = 1,    // first frame each way: token digest, pid, host name
  kBind = 2,     // connector -> listener: "my connection to your listen comm N uses this link"
  kPing = 3,     // sent while requests to the peer are outstanding
  kPong = 4,     // answer to a ping, from the peer's watchdog thread
  kGoodbye = 5,  // we close: the EOF that follows is not a fault; may say why (a fault)
  kRefused = 6,  // the hello failed a check (token); the link closes
  kFault = 7,    // the sender detected a fault in communicator commId (its reason, as in a
                 // goodbye); the link stays, the sender's side of that communicator goes
};

// A reason, in a goodbye when the sender closes because of a fault and in a
// fault notice: value is the FaultClass + 1 (0, goodbye only: a plain close,
// and no payload at all), pid and host the fault's culprit, detail a short
// explanation.
struct Frame {
  Type type = Type::kPing;
  uint64_t value = 0;  // kBind: nonce; kPing/kPong: sequence; kHello: token digest
  uint32_t pid = 0;    // kHello, kGoodbye, kFault
  std::string host;    // kHello, kGoodbye, kFault
  std::string detail;  // kGoodbye, kFault
  uint64_t commId = 0;  // kFault: the communicator the fault was detected in (NCCL's comm hash)
};

inline Frame makeFrame(Type type, uint64_t value = 0) {
  Frame f;
  f.type = type;
  f.value = value;
  return f;
}
inline Frame makeHello(uint64_t tokenDigest, uint32_t pid, std::string host) {
  Frame f = makeFrame(Type::kHello, tokenDigest);
  f.pid = pid;
  f.host = std::move(host);
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

}  // namespace resilient::net::liveness
