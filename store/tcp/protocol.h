// The TCP store's wire protocol, version 1 (docs/store.md, "Wire protocol").
//
// Connection set-up, client first:
//   Hello      u32 magic "RSTO", u16 version, u16 flags (0), u16 token length,
//              u16 name length, token bytes, name bytes (the client's identity
//              for the server's log lines)
//   HelloReply u32 magic, u16 version, u16 status (HelloStatus), u64 server
//              instance id, u32 max frame payload, u32 reserved (0)
// A refused client gets its HelloReply and then the connection closes.
//
// Then frames in both directions, each a 16-byte header and a payload:
//   u32 payload length, u8 opcode (Op; replies set bit 7), u8 flags (0),
//   u16 reserved (0), u64 request id (echoed by the reply)
// Requests may be pipelined; replies come in any order (a wait answers
// late), matched by id. Integers are little-endian; byte strings are a u32
// length and the bytes. Every length is checked against the limits below
// before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/net/socket.h"
#include "store/errors.h"
#include "store/store.h"

namespace resilient::store::tcp {

// Every store connection, both ends: no Nagle delay, and keepalive that
// notices a vanished peer host within about 15 s.
inline constexpr SocketOptions kConnectionOptions{
    .noDelay = true,
    .keepAlive = {.idleS = 5, .intervalS = 2, .count = 5},
    .userTimeoutMs = 0,
    .bufferBytes = 0};

inline constexpr uint32_t kMagic = 0x4f545352;  // "RSTO" in memory order
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHelloFixedBytes = 12;
inline constexpr size_t kHelloReplyBytes = 24;
inline constexpr size_t kMaxTokenBytes = 1024;
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kFrameHeaderBytes = 16;
// Default cap of one frame's payload (requests and replies); a server may set
// its own and announces it in HelloReply.
inline constexpr size_t kDefaultMaxFrameBytes = 8u << 20;
// Keys, missing-key lists and ranks per frame.
inline constexpr size_t kMaxItemsPerFrame = 1u << 20;

enum class HelloStatus : uint16_t {
  kOk = 0,
  kVersionUnsupported = 1,  // the server speaks another version
  kTokenRefused = 2,        // wrong job token
  kBusy = 3,                // the server is at its connection limit
};
const char* helloStatusName(HelloStatus s) noexcept;

enum class Op : uint8_t {
  kPing = 1,
  kSet = 2,           // key, value, i64 ttl ms (0: none)
  kGet = 3,           // key
  kAdd = 4,           // key, i64 delta
  kCompareSet = 5,    // key, u8 has-expected, [expected], desired
  kMultiGet = 6,      // u32 n, n keys
  kMultiSet = 7,      // u32 n, n (key, value)
  kRemove = 8,        // key
  kRemovePrefix = 9,  // prefix
  kCheck = 10,        // u32 n, n keys
  kWait = 11,         // u32 n, n keys, i64 timeout ms
  kBarrier = 12,      // name, u64 generation, i32 rank, i32 world, u8 wait, i64 timeout ms
  // name, u64 generation, u32 n, n x i32 rank, i32 world, u8 wait, i64
  // timeout ms: several ranks in one arrival (a node's agent); answered with
  // kBarrier replies. A client sends it only for several ranks, so a single
  // rank still reaches a server that predates it.
  kBarrierRanks = 13,
  kSetExpiringMany = 14,  // u32 n, n (key, value), i64 ttl ms: every key with that expiry
};
inline constexpr uint8_t kReplyBit = 0x80;
bool validOp(uint8_t op) noexcept;
// The opcode of the replies to a request of `op` (kBarrierRanks: kBarrier).
Op replyOpOf(Op op) noexcept;
const char* opName(Op op) noexcept;

enum class ReplyStatus : uint8_t {
  kOk = 0,
  kTimeout = 1,          // wait: u32 n, missing keys; barrier: report
  kInvalid = 2,          // message
  kBarrierOverflow = 3,  // report
  kBarrierStale = 4,     // -
  kBarrierDropped = 5,   // - (removed by removePrefix while waiting)
  // message: a node's proxy could not reach the job's store for this call
  // (store/proxy/node_proxy.h); the client reports the store lost.
  kUnavailable = 6,
};

struct Hello {
  uint16_t version = kVersion;
  std::string token;
  std::string name;
};

struct HelloReply {
  uint16_t version = kVersion;
  HelloStatus status = HelloStatus::kOk;
  uint64_t instanceId = 0;
  uint32_t maxFrameBytes = kDefaultMaxFrameBytes;
};

struct FrameHeader {
  uint32_t length = 0;
  uint8_t op = 0;
  uint64_t id = 0;
};

struct StoreRequest {
  Op op = Op::kPing;
  uint64_t id = 0;
  std::string key;                      // set get add cas remove removePrefix
  std::string value;                    // set: value; cas: desired
  std::optional<std::string> expected;  // cas
  int64_t number = 0;                   // set(ExpiringMany): ttl ms; add: delta; wait, barrier: timeout ms
  std::vector<std::string> keys;        // multiGet check wait
  std::vector<KeyValue> pairs;          // multiSet, setExpiringMany
  BarrierArrival arrival;               // barrier
};

struct Response {
  Op op = Op::kPing;
  uint64_t id = 0;
  ReplyStatus status = ReplyStatus::kOk;
  bool flag = false;                               // get: found; cas: swapped; remove; check
  std::optional<std::string> value;                // get; cas: current
  int64_t number = 0;                              // add: value; removePrefix: count
  std::vector<std::optional<std::string>> values;  // multiGet
  std::vector<std::string> keys;                   // wait timeout: missing keys
  BarrierResult barrier;                           // barrier ok
  BarrierReport report;                            // barrier timeout / overflow
  std::string message;                             // invalid
};

void encodeHello(const Hello& hello, std::string* out);
void encodeHelloReply(const HelloReply& reply, std::string* out);
// Decode from the start of `in`: nullopt while incomplete; ProtocolError when
// the bytes cannot be a Hello (bad magic, over-long token or name).
std::optional<Hello> decodeHello(std::string_view in, size_t* consumed);
std::optional<HelloReply> decodeHelloReply(std::string_view in);

void encodeFrameHeader(const FrameHeader& h, std::string* out);
// What a side of the connection reads: the server requests, a client replies.
enum class FrameKind { kRequest, kReply };

// ProtocolError on an opcode that is not of `kind`, non-zero flags/reserved or
// a length over maxFrameBytes. `in` must hold kFrameHeaderBytes.
FrameHeader decodeFrameHeader(std::string_view in, size_t maxFrameBytes, FrameKind kind);

// A whole frame (header + payload) appended to `out`.
void encodeRequest(const StoreRequest& req, std::string* out);
void encodeResponse(const Response& resp, std::string* out);
// The reply to a released barrier: encodeResponse's bytes, without building
// a Response (thousands are written at once when a large barrier completes).
void encodeBarrierRelease(uint64_t id, const BarrierResult& result, std::string* out);
// Payload decoders; ProtocolError on anything malformed or over the limits.
StoreRequest decodeRequest(const FrameHeader& h, std::string_view payload);
Response decodeResponse(const FrameHeader& h, std::string_view payload);

}  // namespace resilient::store::tcp
