#include "store/tcp/protocol.h"

#include "store/tcp/wire.h"

namespace resilient::store::tcp {
namespace {

// Byte strings take at least their u32 length.
constexpr size_t kMinStringBytes = 4;

void patchLength(std::string* out, size_t headerStart) {
  const size_t payload = out->size() - headerStart - kFrameHeaderBytes;
  for (int i = 0; i < 4; ++i) {
    (*out)[headerStart + static_cast<size_t>(i)] = static_cast<char>((payload >> (8 * i)) & 0xff);
  }
}

size_t beginFrame(uint8_t op, uint64_t id, std::string* out) {
  const size_t start = out->size();
  encodeFrameHeader(FrameHeader{0, op, id}, out);
  return start;
}

std::string key(WireReader& r, const char* what) {
  return std::string(r.bytes(kMaxKeyBytes, what));
}

std::string value(WireReader& r) {
  return std::string(r.bytes(kMaxValueBytes, "value"));
}

void writeOptional(WireWriter& w, const std::optional<std::string>& v) {
  w.u8(v ? 1 : 0);
  if (v) {
    w.bytes(*v);
  }
}

std::optional<std::string> readOptional(WireReader& r) {
  if (!r.boolean()) {
    return std::nullopt;
  }
  return value(r);
}

void writeRanks(WireWriter& w, const std::vector<int>& ranks) {
  w.u32(static_cast<uint32_t>(ranks.size()));
  for (int rank : ranks) {
    w.i32(rank);
  }
}

std::vector<int> readRanks(WireReader& r) {
  const uint32_t n = r.count(4, kMaxItemsPerFrame, "rank list");
  std::vector<int> ranks(n);
  for (auto& rank : ranks) {
    rank = r.i32();
  }
  return ranks;
}

void writeReport(WireWriter& w, const BarrierReport& rep) {
  w.bytes(rep.name);
  w.u64(rep.generation);
  w.i32(rep.worldSize);
  w.u32(rep.arrived);
  writeRanks(w, rep.missingRanks);
  writeRanks(w, rep.surplusRanks);
}

BarrierReport readReport(WireReader& r) {
  BarrierReport rep;
  rep.name = key(r, "barrier name");
  rep.generation = r.u64();
  rep.worldSize = r.i32();
  rep.arrived = r.u32();
  rep.missingRanks = readRanks(r);
  rep.surplusRanks = readRanks(r);
  return rep;
}

void writeKeys(WireWriter& w, const std::vector<std::string>& keys) {
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) {
    w.bytes(k);
  }
}

std::vector<std::string> readKeys(WireReader& r) {
  const uint32_t n = r.count(kMinStringBytes, kMaxItemsPerFrame, "key list");
  std::vector<std::string> keys;
  keys.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    keys.push_back(key(r, "key"));
  }
  return keys;
}

}  // namespace

const char* helloStatusName(HelloStatus s) noexcept {
  switch (s) {
    case HelloStatus::kOk: return "ok";
    case HelloStatus::kVersionUnsupported: return "version unsupported";
    case HelloStatus::kTokenRefused: return "job token refused";
    case HelloStatus::kBusy: return "server busy (connection limit)";
  }
  return "?";
}

bool validOp(uint8_t op) noexcept {
  return op >= static_cast<uint8_t>(Op::kPing) && op <= static_cast<uint8_t>(Op::kSetExpiringMany);
}

Op replyOpOf(Op op) noexcept {
  return op == Op::kBarrierRanks ? Op::kBarrier : op;
}

const char* opName(Op op) noexcept {
  switch (op) {
    case Op::kPing: return "ping";
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kCompareSet: return "compareSet";
    case Op::kMultiGet: return "multiGet";
    case Op::kMultiSet: return "multiSet";
    case Op::kRemove: return "remove";
    case Op::kRemovePrefix: return "removePrefix";
    case Op::kCheck: return "check";
    case Op::kWait: return "wait";
    case Op::kBarrier: return "barrier";
    case Op::kBarrierRanks: return "barrier(ranks)";
    case Op::kSetExpiringMany: return "setExpiringMany";
  }
  return "?";
}

void encodeHello(const Hello& hello, std::string* out) {
  WireWriter w(*out);
  w.u32(kMagic);
  w.u16(hello.version);
  w.u16(0);
  w.u16(static_cast<uint16_t>(hello.token.size()));
  w.u16(static_cast<uint16_t>(hello.name.size()));
  w.raw(hello.token);
  w.raw(hello.name);
}

void encodeHelloReply(const HelloReply& reply, std::string* out) {
  WireWriter w(*out);
  w.u32(kMagic);
  w.u16(reply.version);
  w.u16(static_cast<uint16_t>(reply.status));
  w.u64(reply.instanceId);
  w.u32(reply.maxFrameBytes);
  w.u32(0);
}

std::optional<Hello> decodeHello(std::string_view in, size_t* consumed) {
  // Refuse a wrong magic as soon as its first bytes disagree, so garbage on
  // the port is dropped without waiting for 12 bytes.
  const size_t have = std::min<size_t>(in.size(), 4);
  for (size_t i = 0; i < have; ++i) {
    if (static_cast<uint8_t>(in[i]) != ((kMagic >> (8 * i)) & 0xff)) {
      throw ProtocolError("bad magic: not a resilient store client");
    }
  }
  if (in.size() < kHelloFixedBytes) {
    return std::nullopt;
  }
  WireReader r(in);
  r.u32();
  Hello hello;
  hello.version = r.u16();
  if (r.u16() != 0) {
    throw ProtocolError("hello: non-zero flags");
  }
  const uint16_t tokenLen = r.u16();
  const uint16_t nameLen = r.u16();
  if (tokenLen > kMaxTokenBytes || nameLen > kMaxNameBytes) {
    throw ProtocolError("hello: token of " + std::to_string(tokenLen) + " bytes or name of " +
                        std::to_string(nameLen) + " bytes over the limit");
  }
  if (r.remaining() < static_cast<size_t>(tokenLen) + nameLen) {
    return std::nullopt;
  }
  hello.token = std::string(r.raw(tokenLen));
  hello.name = std::string(r.raw(nameLen));
  *consumed = kHelloFixedBytes + tokenLen + nameLen;
  return hello;
}

std::optional<HelloReply> decodeHelloReply(std::string_view in) {
  if (in.size() < kHelloReplyBytes) {
    return std::nullopt;
  }
  WireReader r(in.substr(0, kHelloReplyBytes));
  if (r.u32() != kMagic) {
    throw ProtocolError("bad magic in the server's reply: not a resilient store server");
  }
  HelloReply reply;
  reply.version = r.u16();
  reply.status = static_cast<HelloStatus>(r.u16());
  reply.instanceId = r.u64();
  reply.maxFrameBytes = r.u32();
  r.u32();
  return reply;
}

void encodeFrameHeader(const FrameHeader& h, std::string* out) {
  WireWriter w(*out);
  w.u32(h.length);
  w.u8(h.op);
  w.u8(0);
  w.u16(0);
  w.u64(h.id);
}

FrameHeader decodeFrameHeader(std::string_view in, size_t maxFrameBytes, FrameKind kind) {
  WireReader r(in.substr(0, kFrameHeaderBytes));
  FrameHeader h;
  h.length = r.u32();
  h.op = r.u8();
  const uint8_t flags = r.u8();
  const uint16_t reserved = r.u16();
  h.id = r.u64();
  const bool isReply = (h.op & kReplyBit) != 0;
  if (isReply != (kind == FrameKind::kReply) || !validOp(static_cast<uint8_t>(h.op & ~kReplyBit))) {
    throw ProtocolError("bad opcode " + std::to_string(h.op));
  }
  if (flags != 0 || reserved != 0) {
    throw ProtocolError("non-zero reserved header bits");
  }
  if (h.length > maxFrameBytes) {
    throw ProtocolError("frame of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                        std::to_string(maxFrameBytes));
  }
  return h;
}

void encodeRequest(const StoreRequest& req, std::string* out) {
  const size_t start = beginFrame(static_cast<uint8_t>(req.op), req.id, out);
  WireWriter w(*out);
  switch (req.op) {
    case Op::kPing: break;
    case Op::kSet:
      w.bytes(req.key);
      w.bytes(req.value);
      w.i64(req.number);
      break;
    case Op::kGet:
    case Op::kRemove:
    case Op::kRemovePrefix: w.bytes(req.key); break;
    case Op::kAdd:
      w.bytes(req.key);
      w.i64(req.number);
      break;
    case Op::kCompareSet:
      w.bytes(req.key);
      writeOptional(w, req.expected);
      w.bytes(req.value);
      break;
    case Op::kMultiGet:
    case Op::kCheck: writeKeys(w, req.keys); break;
    case Op::kMultiSet:
    case Op::kSetExpiringMany:
      w.u32(static_cast<uint32_t>(req.pairs.size()));
      for (const auto& [k, v] : req.pairs) {
        w.bytes(k);
        w.bytes(v);
      }
      if (req.op == Op::kSetExpiringMany) {
        w.i64(req.number);
      }
      break;
    case Op::kWait:
      writeKeys(w, req.keys);
      w.i64(req.number);
      break;
    case Op::kBarrier:
      w.bytes(req.arrival.name);
      w.u64(req.arrival.generation);
      w.i32(req.arrival.rank);
      w.i32(req.arrival.worldSize);
      w.u8(req.arrival.waitForRelease ? 1 : 0);
      w.i64(req.number);
      break;
    case Op::kBarrierRanks:
      w.bytes(req.arrival.name);
      w.u64(req.arrival.generation);
      w.u32(static_cast<uint32_t>(req.arrival.ranks.size()));
      for (const int rank : req.arrival.ranks) {
        w.i32(rank);
      }
      w.i32(req.arrival.worldSize);
      w.u8(req.arrival.waitForRelease ? 1 : 0);
      w.i64(req.number);
      break;
  }
  patchLength(out, start);
}

StoreRequest decodeRequest(const FrameHeader& h, std::string_view payload) {
  WireReader r(payload);
  StoreRequest req;
  req.op = static_cast<Op>(h.op);
  req.id = h.id;
  switch (req.op) {
    case Op::kPing: break;
    case Op::kSet:
      req.key = key(r, "key");
      req.value = value(r);
      req.number = r.i64();
      break;
    case Op::kGet:
    case Op::kRemove: req.key = key(r, "key"); break;
    case Op::kRemovePrefix: req.key = key(r, "prefix"); break;
    case Op::kAdd:
      req.key = key(r, "key");
      req.number = r.i64();
      break;
    case Op::kCompareSet:
      req.key = key(r, "key");
      req.expected = readOptional(r);
      req.value = value(r);
      break;
    case Op::kMultiGet:
    case Op::kCheck: req.keys = readKeys(r); break;
    case Op::kMultiSet:
    case Op::kSetExpiringMany: {
      const uint32_t n = r.count(2 * kMinStringBytes, kMaxItemsPerFrame, "pair list");
      req.pairs.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        std::string k = key(r, "key");
        req.pairs.emplace_back(std::move(k), value(r));
      }
      if (req.op == Op::kSetExpiringMany) {
        req.number = r.i64();
      }
      break;
    }
    case Op::kWait:
      req.keys = readKeys(r);
      req.number = r.i64();
      break;
    case Op::kBarrier:
      req.arrival.name = key(r, "barrier name");
      req.arrival.generation = r.u64();
      req.arrival.rank = r.i32();
      req.arrival.worldSize = r.i32();
      req.arrival.waitForRelease = r.boolean();
      req.number = r.i64();
      break;
    case Op::kBarrierRanks: {
      req.arrival.name = key(r, "barrier name");
      req.arrival.generation = r.u64();
      const uint32_t n = r.count(4, kMaxItemsPerFrame, "rank list");
      req.arrival.ranks.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        req.arrival.ranks.push_back(r.i32());
      }
      if (n == 0) {
        throw ProtocolError("barrier(ranks) with no rank");
      }
      req.arrival.rank = req.arrival.ranks.front();
      req.arrival.worldSize = r.i32();
      req.arrival.waitForRelease = r.boolean();
      req.number = r.i64();
      break;
    }
  }
  r.expectEnd(opName(req.op));
  return req;
}

void encodeResponse(const Response& resp, std::string* out) {
  const size_t start = beginFrame(static_cast<uint8_t>(resp.op) | kReplyBit, resp.id, out);
  WireWriter w(*out);
  w.u8(static_cast<uint8_t>(resp.status));
  switch (resp.status) {
    case ReplyStatus::kOk:
      switch (resp.op) {
        case Op::kPing:
        case Op::kSet:
        case Op::kMultiSet:
        case Op::kSetExpiringMany:
        case Op::kWait: break;
        case Op::kGet: writeOptional(w, resp.value); break;
        case Op::kAdd:
        case Op::kRemovePrefix: w.i64(resp.number); break;
        case Op::kCompareSet:
          w.u8(resp.flag ? 1 : 0);
          writeOptional(w, resp.value);
          break;
        case Op::kMultiGet:
          w.u32(static_cast<uint32_t>(resp.values.size()));
          for (const auto& v : resp.values) {
            writeOptional(w, v);
          }
          break;
        case Op::kRemove:
        case Op::kCheck: w.u8(resp.flag ? 1 : 0); break;
        case Op::kBarrier:
        case Op::kBarrierRanks:
          w.u8(resp.barrier.completed ? 1 : 0);
          w.u32(resp.barrier.arrivalIndex);
          w.u32(resp.barrier.arrived);
          break;
      }
      break;
    case ReplyStatus::kTimeout:
      if (replyOpOf(resp.op) == Op::kBarrier) {
        writeReport(w, resp.report);
      } else {
        writeKeys(w, resp.keys);
      }
      break;
    case ReplyStatus::kBarrierOverflow: writeReport(w, resp.report); break;
    case ReplyStatus::kInvalid:
    case ReplyStatus::kUnavailable: w.bytes(resp.message); break;
    case ReplyStatus::kBarrierStale:
    case ReplyStatus::kBarrierDropped: break;
  }
  patchLength(out, start);
}

void encodeBarrierRelease(uint64_t id, const BarrierResult& result, std::string* out) {
  constexpr uint32_t kPayload = 1 + 1 + 4 + 4;
  encodeFrameHeader(FrameHeader{kPayload, static_cast<uint8_t>(Op::kBarrier) | kReplyBit, id}, out);
  WireWriter w(*out);
  w.u8(static_cast<uint8_t>(ReplyStatus::kOk));
  w.u8(result.completed ? 1 : 0);
  w.u32(result.arrivalIndex);
  w.u32(result.arrived);
}

Response decodeResponse(const FrameHeader& h, std::string_view payload) {
  WireReader r(payload);
  Response resp;
  resp.op = static_cast<Op>(h.op & ~kReplyBit);
  resp.id = h.id;
  const uint8_t status = r.u8();
  if (status > static_cast<uint8_t>(ReplyStatus::kUnavailable)) {
    throw ProtocolError("bad reply status " + std::to_string(status));
  }
  resp.status = static_cast<ReplyStatus>(status);
  switch (resp.status) {
    case ReplyStatus::kOk:
      switch (resp.op) {
        case Op::kPing:
        case Op::kSet:
        case Op::kMultiSet:
        case Op::kSetExpiringMany:
        case Op::kWait: break;
        case Op::kGet: resp.value = readOptional(r); break;
        case Op::kAdd:
        case Op::kRemovePrefix: resp.number = r.i64(); break;
        case Op::kCompareSet:
          resp.flag = r.boolean();
          resp.value = readOptional(r);
          break;
        case Op::kMultiGet: {
          const uint32_t n = r.count(1, kMaxItemsPerFrame, "value list");
          resp.values.reserve(n);
          for (uint32_t i = 0; i < n; ++i) {
            resp.values.push_back(readOptional(r));
          }
          break;
        }
        case Op::kRemove:
        case Op::kCheck: resp.flag = r.boolean(); break;
        case Op::kBarrier:
        case Op::kBarrierRanks:
          resp.barrier.completed = r.boolean();
          resp.barrier.arrivalIndex = r.u32();
          resp.barrier.arrived = r.u32();
          break;
      }
      break;
    case ReplyStatus::kTimeout:
      if (replyOpOf(resp.op) == Op::kBarrier) {
        resp.report = readReport(r);
      } else {
        resp.keys = readKeys(r);
      }
      break;
    case ReplyStatus::kBarrierOverflow: resp.report = readReport(r); break;
    case ReplyStatus::kInvalid:
    case ReplyStatus::kUnavailable:
      resp.message = std::string(r.bytes(size_t{64} * 1024, "message"));
      break;
    case ReplyStatus::kBarrierStale:
    case ReplyStatus::kBarrierDropped: break;
  }
  r.expectEnd("reply");
  return resp;
}

}  // namespace resilient::store::tcp
