// StoreRendezvous on the in-memory store, ranks as threads.
#include <atomic>
#include <chrono>
#include <thread>

#include "resilient/restart/errors.hpp"
#include "tests/unit/restart/comm/comm_harness.h"

using namespace resilient;
using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

std::shared_ptr<store::MemoryStore> memoryStore() {
  return std::make_shared<store::MemoryStore>();
}

}  // namespace

TEST_CASE("allGather returns every rank's value in rank order, round after round",
          "[rendezvous]") {
  auto s = memoryStore();
  const commtest::Iteration it(s, 3, 4);
  auto errors = it.run([&](int rank, commtest::RankContext& c) {
    for (int round = 0; round < 3; ++round) {
      const std::string mine = "r" + std::to_string(rank) + "-" + std::to_string(round);
      auto all = c.rendezvous->allGather("round" + std::to_string(round), mine, milliseconds(5000));
      commtest::expect(all.size() == 4, "4 values");
      for (int r = 0; r < 4; ++r) {
        commtest::expect(all[static_cast<size_t>(r)] ==
                         "r" + std::to_string(r) + "-" + std::to_string(round),
                     "value of rank " + std::to_string(r));
      }
    }
  });
  for (auto& e : errors) {
    REQUIRE(commtest::messageOf(e).empty());
  }
  // The keys live under the iteration's prefix of the job's store.
  REQUIRE(s->get("iter/3/gather/round2/1") == std::optional<std::string>("r1-2"));
}

TEST_CASE("allGather carries binary values of any length", "[rendezvous]") {
  auto s = memoryStore();
  const commtest::Iteration it(s, 0, 2);
  std::string blob(4096, '\0');
  for (size_t i = 0; i < blob.size(); ++i) {
    blob[i] = static_cast<char>(i * 7);
  }
  auto errors = it.run([&](int rank, commtest::RankContext& c) {
    auto all = c.rendezvous->allGather("bin", rank == 0 ? blob : std::string(), milliseconds(5000));
    commtest::expect(all[0] == blob, "rank 0's blob");
    commtest::expect(all[1].empty(), "rank 1's empty value");
  });
  REQUIRE(commtest::messageOf(errors[0]).empty());
  REQUIRE(commtest::messageOf(errors[1]).empty());
}

TEST_CASE("lookup waits for a later publish without polling", "[rendezvous]") {
  auto s = memoryStore();
  const commtest::Iteration it(s, 1, 2);
  auto errors = it.run([&](int rank, commtest::RankContext& c) {
    if (rank == 0) {
      std::this_thread::sleep_for(milliseconds(100));
      c.rendezvous->publish("id", std::string("\0abc", 4));
    } else {
      const auto start = std::chrono::steady_clock::now();
      commtest::expect(c.rendezvous->lookup("id", milliseconds(5000)) == std::string("\0abc", 4),
                   "the published bytes");
      commtest::expect(std::chrono::steady_clock::now() - start >= milliseconds(90), "waited");
    }
  });
  REQUIRE(commtest::messageOf(errors[0]).empty());
  REQUIRE(commtest::messageOf(errors[1]).empty());
}

TEST_CASE("a lookup that times out names the key", "[rendezvous]") {
  const commtest::Iteration it(memoryStore(), 0, 1);
  commtest::RankContext c = it.context(0);
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)c.rendezvous->lookup("nccl-id", milliseconds(150));
    FAIL("no timeout");
  } catch (const restart::TimeoutError& e) {
    REQUIRE_THAT(e.what(), Catch::Contains("'nccl-id'") && Catch::Contains("150 ms"));
  }
  REQUIRE(std::chrono::steady_clock::now() - start < milliseconds(2000));
}

TEST_CASE("an incomplete allGather names the missing ranks", "[rendezvous]") {
  auto s = memoryStore();
  const commtest::Iteration it(s, 0, 4);
  auto errors = it.run([&](int rank, commtest::RankContext& c) {
    if (rank == 2) {
      return;  // never arrives
    }
    (void)c.rendezvous->allGather("handles", "x", milliseconds(200));
  });
  REQUIRE(commtest::messageOf(errors[2]).empty());
  for (int r : {0, 1, 3}) {
    CAPTURE(r);
    const std::string text = commtest::messageOf(errors[static_cast<size_t>(r)]);
    REQUIRE_THAT(text, Catch::Contains("'handles'") && Catch::Contains("missing ranks: 2") &&
                           Catch::Contains("of 4"));
    REQUIRE_THROWS_AS(std::rethrow_exception(errors[static_cast<size_t>(r)]),
                      restart::TimeoutError);
  }
}

TEST_CASE("store failures become RestartError", "[rendezvous]") {
  auto s = memoryStore();
  comm::StoreRendezvous rv(s, 0, 2);
  s->close();
  REQUIRE_THROWS_AS(rv.publish("k", "v"), RestartError);
  REQUIRE_THROWS_WITH(rv.allGather("g", "v", milliseconds(100)), Catch::Contains("store error"));
}

TEST_CASE("a rank outside the members is refused", "[rendezvous]") {
  auto s = memoryStore();
  REQUIRE_THROWS_AS(comm::StoreRendezvous(s, 2, 2), InternalError);
  REQUIRE_THROWS_AS(comm::StoreRendezvous(s, -1, 2), InternalError);
  REQUIRE_THROWS_AS(comm::StoreRendezvous(nullptr, 0, 1), InternalError);
}
