// Ring all-reduce schedule: segments, chunk ranges, the match between a
// sender's and its receiver's items, and a sequential simulation of the
// whole algorithm for several ranks and odd sizes.
#include <numeric>
#include <vector>

#include "hostengine/ring_schedule.h"

namespace he = resilient::hostengine;

TEST_CASE("splitRange makes near-equal contiguous parts", "[hostengine][ring]") {
  const he::ElementRange whole{10, 17};
  size_t at = 10;
  for (size_t i = 0; i < 5; ++i) {
    const he::ElementRange r = he::splitRange(whole, 5, i);
    CHECK(r.offset == at);
    CHECK((r.count == 3 || r.count == 4));
    CHECK(r.count == (i < 2 ? 4u : 3u));
    at += r.count;
  }
  CHECK(at == 27);
  CHECK(he::splitRange({0, 2}, 4, 3).count == 0);
  CHECK(he::splitRange({0, 2}, 4, 0).count == 1);
}

TEST_CASE("segments partition the buffer and chunks partition the segments", "[hostengine][ring]") {
  for (int n : {2, 3, 4, 5, 7}) {
    for (size_t count : {0, 1, 2, 5, 17, 1000, 1001, 65537}) {
      for (size_t chunk : {1, 3, 64, 100000}) {
        CAPTURE(n, count, chunk);
        const he::RingSchedule s({.nranks = n, .rank = 0, .count = count, .chunkElements = chunk});
        REQUIRE(s.chunksPerStep() >= 1);
        REQUIRE(s.items() == s.steps() * s.chunksPerStep());
        size_t at = 0;
        for (int seg = 0; seg < n; ++seg) {
          const he::ElementRange r = s.segment(seg);
          REQUIRE(r.offset == at);
          at += r.count;
          // Chunks of this segment, in order, cover it exactly and respect the chunk limit.
          size_t c = r.offset;
          for (size_t k = 0; k < s.chunksPerStep(); ++k) {
            const he::ElementRange part = he::splitRange(r, s.chunksPerStep(), k);
            REQUIRE(part.offset == c);
            REQUIRE(part.count <= std::max<size_t>(chunk, 1));
            c += part.count;
          }
          REQUIRE(c == r.offset + r.count);
        }
        REQUIRE(at == count);
      }
    }
  }
}

TEST_CASE("what rank r sends as item j is what rank r+1 receives as item j", "[hostengine][ring]") {
  for (int n : {2, 3, 4, 6}) {
    for (size_t count : {0, 7, 4099}) {
      CAPTURE(n, count);
      for (int r = 0; r < n; ++r) {
        const he::RingSchedule sender(
            {.nranks = n, .rank = r, .count = count, .chunkElements = 100});
        const he::RingSchedule receiver(
            {.nranks = n, .rank = (r + 1) % n, .count = count, .chunkElements = 100});
        REQUIRE(sender.items() == receiver.items());
        for (size_t j = 0; j < sender.items(); ++j) {
          REQUIRE(sender.sendChunk(j) == receiver.recvChunk(j));
          REQUIRE(sender.isReduce(j) == receiver.isReduce(j));
        }
      }
    }
  }
}

TEST_CASE("the schedule's steps follow the ring algorithm", "[hostengine][ring]") {
  const int n = 4;
  const he::RingSchedule s({.nranks = n, .rank = 1, .count = 1000, .chunkElements = 1000});
  // Reduce-scatter: send r-k, receive r-k-1.
  CHECK(s.sendSegment(0) == 1);
  CHECK(s.recvSegment(0) == 0);
  CHECK(s.sendSegment(2) == 3);
  CHECK(s.recvSegment(2) == 2);
  CHECK(s.ownedSegment() == 2);
  // All-gather: send r+1-k (the owned segment first), receive r-k.
  CHECK(s.sendSegment(3) == 2);
  CHECK(s.recvSegment(3) == 1);
  CHECK(s.sendSegment(5) == 0);
  CHECK(s.recvSegment(5) == 3);
  CHECK(s.isReduce(0));
  CHECK(s.isReduce(2));
  CHECK_FALSE(s.isReduce(3));
  // Dependencies: forwarding waits for the chunk one step earlier; an
  // all-gather chunk waits for the reduce-scatter send from the same place.
  CHECK(s.recvsBeforeSend(0) == 0);
  CHECK(s.recvsBeforeSend(1) == 1);
  CHECK(s.recvsBeforeSend(5) == 5);
  CHECK(s.sendsBeforeRecv(2) == 0);
  CHECK(s.sendsBeforeRecv(3) == 1);
  CHECK(s.sendsBeforeRecv(5) == 3);
  for (size_t j = 3; j < s.items(); ++j) {
    // The all-gather destination is where this rank sent from at that send.
    CHECK(s.recvChunk(j) == s.sendChunk(s.sendsBeforeRecv(j) - 1));
  }
}

// Runs the whole schedule sequentially, one lock-step item at a time, on
// integer data, honouring the dependencies, and checks every rank ends with
// the full sum.
TEST_CASE("a simulated pipelined ring all-reduce yields the sum everywhere", "[hostengine][ring]") {
  for (int n : {2, 3, 4, 5, 7}) {
    for (size_t count : {0, 1, 3, 17, 1001}) {
      for (size_t chunk : {1, 4, 50}) {
        CAPTURE(n, count, chunk);
        std::vector<std::vector<long>> acc(static_cast<size_t>(n), std::vector<long>(count));
        std::vector<long> expected(count, 0);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            acc[static_cast<size_t>(r)][i] = (r + 1) * 1000L + static_cast<long>(i);
            expected[i] += acc[static_cast<size_t>(r)][i];
          }
        }
        std::vector<he::RingSchedule> s;
        s.reserve(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          s.emplace_back(he::RingScheduleOptions{
              .nranks = n, .rank = r, .count = count, .chunkElements = chunk});
        }
        const size_t items = s[0].items();
        // Item j moves from every rank to its next one; item j is sent only
        // after item j - chunksPerStep was received, so lock-step order is valid.
        for (size_t j = 0; j < items; ++j) {
          std::vector<std::vector<long>> wire(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            REQUIRE(s[static_cast<size_t>(r)].recvsBeforeSend(j) <= j);
            const he::ElementRange c = s[static_cast<size_t>(r)].sendChunk(j);
            const auto& a = acc[static_cast<size_t>(r)];
            wire[static_cast<size_t>(r)].assign(a.begin() + static_cast<long>(c.offset),
                                                a.begin() + static_cast<long>(c.offset + c.count));
          }
          for (int r = 0; r < n; ++r) {
            const int from = (r + n - 1) % n;
            const he::ElementRange c = s[static_cast<size_t>(r)].recvChunk(j);
            const auto& in = wire[static_cast<size_t>(from)];
            REQUIRE(in.size() == c.count);
            auto& a = acc[static_cast<size_t>(r)];
            for (size_t i = 0; i < c.count; ++i) {
              if (s[static_cast<size_t>(r)].isReduce(j)) {
                a[c.offset + i] += in[i];
              } else {
                a[c.offset + i] = in[i];
              }
            }
          }
        }
        for (int r = 0; r < n; ++r) {
          REQUIRE(acc[static_cast<size_t>(r)] == expected);
        }
      }
    }
  }
}
