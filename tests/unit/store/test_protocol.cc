// The TCP store's wire protocol: round trips, incremental decoding and the
// refusal of malformed or oversized input.
#include <fstream>
#include <iterator>

#include <catch2/catch.hpp>

#include "store/backoff.h"
#include "store/errors.h"
#include "store/tcp/frame_decoder.h"
#include "store/tcp/protocol.h"
#include "store/tcp/wire.h"

using namespace resilient::store;
using namespace resilient::store::tcp;

namespace {

StoreRequest roundTrip(const StoreRequest& req) {
  std::string bytes;
  encodeRequest(req, &bytes);
  FrameDecoder d(kDefaultMaxFrameBytes, FrameKind::kRequest);
  d.feed(bytes);
  std::optional<Frame> f = d.next();
  REQUIRE(f.has_value());
  CHECK(d.buffered() == 0);
  return decodeRequest(f->header, f->payload);
}

Response replyRoundTrip(const Response& resp) {
  std::string bytes;
  encodeResponse(resp, &bytes);
  FrameDecoder d(kDefaultMaxFrameBytes, FrameKind::kReply);
  d.feed(bytes);
  std::optional<Frame> f = d.next();
  REQUIRE(f.has_value());
  return decodeResponse(f->header, f->payload);
}

}  // namespace

TEST_CASE("protocol: requests survive encoding and decoding", "[store][protocol]") {
  StoreRequest set;
  set.op = Op::kSet;
  set.id = 0x0102030405060708ull;
  set.key = "key";
  set.value = std::string("v\0x", 3);
  set.number = 1500;
  StoreRequest got = roundTrip(set);
  CHECK(got.op == Op::kSet);
  CHECK(got.id == set.id);
  CHECK(got.key == "key");
  CHECK(got.value == set.value);
  CHECK(got.number == 1500);

  StoreRequest cas;
  cas.op = Op::kCompareSet;
  cas.key = "k";
  cas.expected = "old";
  cas.value = "new";
  got = roundTrip(cas);
  CHECK(got.expected == std::optional<std::string>("old"));
  cas.expected.reset();
  CHECK_FALSE(roundTrip(cas).expected.has_value());

  StoreRequest ms;
  ms.op = Op::kMultiSet;
  ms.pairs = {{"a", "1"}, {"b", ""}};
  CHECK(roundTrip(ms).pairs == ms.pairs);

  StoreRequest bar;
  bar.op = Op::kBarrier;
  bar.arrival = {"name", 77, 3, 16384, false};
  bar.number = -5;
  got = roundTrip(bar);
  CHECK(got.arrival.name == "name");
  CHECK(got.arrival.generation == 77);
  CHECK(got.arrival.rank == 3);
  CHECK(got.arrival.worldSize == 16384);
  CHECK_FALSE(got.arrival.waitForRelease);
  CHECK(got.number == -5);

  // A node's agent: several ranks in one arrival, a batch of heartbeats.
  StoreRequest ranks;
  ranks.op = Op::kBarrierRanks;
  ranks.arrival = {"iteration", 4, 0, 64, true};
  ranks.arrival.ranks = {8, 9, 10, 15};
  ranks.number = 2500;
  got = roundTrip(ranks);
  CHECK(got.op == Op::kBarrierRanks);
  CHECK(got.arrival.ranks == std::vector<int>{8, 9, 10, 15});
  CHECK(got.arrival.rank == 8);
  CHECK(got.arrival.worldSize == 64);
  CHECK(got.arrival.waitForRelease);
  CHECK(got.number == 2500);
  StoreRequest empty = ranks;
  empty.arrival.ranks.clear();
  std::string bytes;
  encodeRequest(empty, &bytes);
  FrameDecoder d(kDefaultMaxFrameBytes, FrameKind::kRequest);
  d.feed(bytes);
  std::optional<Frame> f = d.next();
  REQUIRE(f);
  CHECK_THROWS_AS(decodeRequest(f->header, f->payload), resilient::store::ProtocolError);

  StoreRequest beats;
  beats.op = Op::kSetExpiringMany;
  beats.pairs = {{"heartbeat/3", "17"}, {"heartbeat/4", "18"}};
  beats.number = 30000;
  got = roundTrip(beats);
  CHECK(got.pairs == beats.pairs);
  CHECK(got.number == 30000);
  CHECK(replyOpOf(Op::kBarrierRanks) == Op::kBarrier);
  CHECK(replyOpOf(Op::kSetExpiringMany) == Op::kSetExpiringMany);
}

TEST_CASE("protocol: replies survive encoding and decoding", "[store][protocol]") {
  Response r;
  r.op = Op::kBarrier;
  r.id = 9;
  r.status = ReplyStatus::kTimeout;
  r.report = {"b", 2, 8, 6, {1, 5}, {9}};
  Response got = replyRoundTrip(r);
  CHECK(got.status == ReplyStatus::kTimeout);
  CHECK(got.report.missingRanks == std::vector<int>{1, 5});
  CHECK(got.report.surplusRanks == std::vector<int>{9});
  CHECK(got.report.arrived == 6);

  Response mg;
  mg.op = Op::kMultiGet;
  mg.values = {std::string("x"), std::nullopt, std::string()};
  CHECK(replyRoundTrip(mg).values == mg.values);

  // A node's proxy that could not reach the job's store.
  Response un;
  un.op = Op::kGet;
  un.status = ReplyStatus::kUnavailable;
  un.message = "the job's store, through the node's proxy: unreachable";
  got = replyRoundTrip(un);
  CHECK(got.status == ReplyStatus::kUnavailable);
  CHECK(got.message == un.message);
}

TEST_CASE("protocol: frames decode whatever the split of the byte stream", "[store][protocol]") {
  std::string stream;
  for (int i = 0; i < 20; ++i) {
    StoreRequest r;
    r.op = i % 2 ? Op::kGet : Op::kAdd;
    r.id = static_cast<uint64_t>(i);
    r.key = "key" + std::to_string(i);
    r.number = i;
    encodeRequest(r, &stream);
  }
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{16}, size_t{17}, stream.size()}) {
    CAPTURE(chunk);
    FrameDecoder d(kDefaultMaxFrameBytes, FrameKind::kRequest);
    std::vector<uint64_t> ids;
    for (size_t pos = 0; pos < stream.size(); pos += chunk) {
      d.feed(std::string_view(stream).substr(pos, chunk));
      while (std::optional<Frame> f = d.next()) {
        ids.push_back(decodeRequest(f->header, f->payload).id);
      }
    }
    REQUIRE(ids.size() == 20);
    for (uint64_t i = 0; i < 20; ++i) {
      CHECK(ids[i] == i);
    }
    CHECK(d.buffered() == 0);
  }
}

TEST_CASE("protocol: malformed and oversized input is refused", "[store][protocol]") {
  SECTION("a header announcing more than the limit, before any payload arrives") {
    FrameDecoder d(1024, FrameKind::kRequest);
    std::string h;
    encodeFrameHeader(FrameHeader{1025, static_cast<uint8_t>(Op::kGet), 1}, &h);
    d.feed(h);
    CHECK_THROWS_AS(d.next(), ProtocolError);
  }
  SECTION("an unknown opcode, a reply where a request belongs, reserved bits") {
    std::string h;
    encodeFrameHeader(FrameHeader{0, 99, 1}, &h);
    CHECK_THROWS_AS(decodeFrameHeader(h, 1024, FrameKind::kRequest), ProtocolError);
    h.clear();
    encodeFrameHeader(FrameHeader{0, static_cast<uint8_t>(Op::kGet) | kReplyBit, 1}, &h);
    CHECK_THROWS_AS(decodeFrameHeader(h, 1024, FrameKind::kRequest), ProtocolError);
    h.clear();
    encodeFrameHeader(FrameHeader{0, static_cast<uint8_t>(Op::kGet), 1}, &h);
    h[5] = 1;
    CHECK_THROWS_AS(decodeFrameHeader(h, 1024, FrameKind::kRequest), ProtocolError);
  }
  SECTION("a payload that lies about its lengths") {
    std::string payload;
    WireWriter w(payload);
    w.u32(1000000);  // a key of a million bytes in a 4-byte payload
    FrameHeader h{static_cast<uint32_t>(payload.size()), static_cast<uint8_t>(Op::kGet), 1};
    CHECK_THROWS_AS(decodeRequest(h, payload), ProtocolError);
    payload.clear();
    w.u32(0xffffffffu);  // four billion keys
    h.op = static_cast<uint8_t>(Op::kMultiGet);
    h.length = static_cast<uint32_t>(payload.size());
    CHECK_THROWS_AS(decodeRequest(h, payload), ProtocolError);
  }
  SECTION("trailing bytes after a well-formed payload") {
    StoreRequest r;
    r.op = Op::kGet;
    r.key = "k";
    std::string bytes;
    encodeRequest(r, &bytes);
    bytes += "junk";
    std::string_view payload = std::string_view(bytes).substr(kFrameHeaderBytes);
    const FrameHeader h{static_cast<uint32_t>(payload.size()), static_cast<uint8_t>(Op::kGet), 0};
    CHECK_THROWS_AS(decodeRequest(h, payload), ProtocolError);
  }
  SECTION("a bad magic is refused from its first wrong byte") {
    size_t consumed = 0;
    CHECK_THROWS_AS(decodeHello("G", &consumed), ProtocolError);
    CHECK_THROWS_AS(decodeHello("GET / HTTP/1.1\r\n", &consumed), ProtocolError);
    CHECK_FALSE(decodeHello("RS", &consumed).has_value());  // a correct start: wait for more
  }
  SECTION("a hello with an over-long token") {
    std::string hello;
    encodeHello(Hello{kVersion, std::string(kMaxTokenBytes + 1, 't'), "n"}, &hello);
    size_t consumed = 0;
    CHECK_THROWS_AS(decodeHello(hello, &consumed), ProtocolError);
  }
}

TEST_CASE("protocol: hello round trip", "[store][protocol]") {
  std::string bytes;
  encodeHello(Hello{kVersion, "secret", "rank 3"}, &bytes);
  size_t consumed = 0;
  CHECK_FALSE(decodeHello(std::string_view(bytes).substr(0, bytes.size() - 1), &consumed));
  std::optional<Hello> h = decodeHello(bytes, &consumed);
  REQUIRE(h);
  CHECK(consumed == bytes.size());
  CHECK(h->token == "secret");
  CHECK(h->name == "rank 3");
  bytes.clear();
  encodeHelloReply(HelloReply{kVersion, HelloStatus::kTokenRefused, 42, 1000}, &bytes);
  CHECK(bytes.size() == kHelloReplyBytes);
  std::optional<HelloReply> r = decodeHelloReply(bytes);
  REQUIRE(r);
  CHECK(r->status == HelloStatus::kTokenRefused);
  CHECK(r->instanceId == 42);
  CHECK(r->maxFrameBytes == 1000);
}

TEST_CASE("backoff grows with jitter up to its cap", "[store][protocol]") {
  Backoff b(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 2.0, 12345);
  std::vector<int64_t> d;
  for (int i = 0; i < 12; ++i) {
    d.push_back(b.next().count());
  }
  CHECK(d[0] >= 50);
  CHECK(d[0] <= 150);
  CHECK(d[1] >= 100);
  CHECK(d[1] <= 300);
  for (int64_t v : d) {
    CHECK(v <= 1000);
    CHECK(v >= 1);
  }
  CHECK(d.back() >= 500);  // at the cap, jitter keeps it in [500, 1000]
  CHECK(b.attempts() == 12);
}

TEST_CASE("rank lists are compressed into ranges", "[store][protocol]") {
  CHECK(formatRanks({}) == "none");
  CHECK(formatRanks({3}) == "3");
  CHECK(formatRanks({0, 1, 2, 5, 7, 8}) == "0-2, 5, 7-8");
  std::vector<int> many;
  many.reserve(50);
  for (int i = 0; i < 100; i += 2) {
    many.push_back(i);
  }
  const std::string s = formatRanks(many, 4);
  CHECK(s == "0, 2, 4, 6, ... (50 in all)");
}

#ifdef RESILIENT_STORE_FUZZ_SEEDS
TEST_CASE("protocol: frames written by an independent encoder decode", "[store][protocol]") {
  // fuzz/store/make_seeds.py encodes from the protocol description
  // in Python; the seed is a mode byte, then pieces led by a size byte.
  std::ifstream in(RESILIENT_STORE_FUZZ_SEEDS "/session_no_handshake", std::ios::binary);
  REQUIRE(in.good());
  const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string stream;
  for (size_t pos = 1; pos < seed.size();) {
    const size_t n = (static_cast<uint8_t>(seed[pos]) & 63) + 1;
    stream.append(seed, pos + 1, n);
    pos += 1 + n;
  }
  FrameDecoder d(kDefaultMaxFrameBytes, FrameKind::kRequest);
  d.feed(stream);
  std::vector<Op> ops;
  while (std::optional<Frame> f = d.next()) {
    ops.push_back(decodeRequest(f->header, f->payload).op);
  }
  CHECK(d.buffered() == 0);
  REQUIRE(ops.size() == 20);
  CHECK(ops.front() == Op::kPing);
  CHECK(ops[11] == Op::kBarrier);
  CHECK(ops[16] == Op::kRemovePrefix);
  CHECK(ops[17] == Op::kBarrierRanks);
  CHECK(ops[18] == Op::kSetExpiringMany);
  CHECK(ops.back() == Op::kBarrierRanks);
}
#endif

TEST_CASE("protocol: the barrier release fast path writes encodeResponse's bytes",
          "[store][protocol]") {
  Response r;
  r.op = Op::kBarrier;
  r.id = 77;
  r.barrier = {true, 12, 16384};
  std::string slow;
  encodeResponse(r, &slow);
  std::string fast;
  encodeBarrierRelease(77, r.barrier, &fast);
  CHECK(fast == slow);
}
