// "Who is behind": the rank with fewer operations enqueued on a communicator
// than its peers agree on is the culprit of a hang.
#include <catch2/catch.hpp>

#include "restart/loop/job/behind_ranks.h"
#include "store/memory_store.h"

using namespace resilient;
using restart::CommProgress;

TEST_CASE("the rank that never reached the collective is behind", "[restart][behind]") {
  // Communicator 7: ranks 0, 1, 3 enqueued collective 12, rank 2 is still at
  // 11. Communicator 9 (ranks 0, 1) agrees.
  const std::map<int, CommProgress> progress = {
      {0, {{7, 12}, {9, 40}}}, {1, {{7, 12}, {9, 40}}}, {2, {{7, 11}}}, {3, {{7, 12}}}};
  CHECK(restart::behindRanks(progress) == std::set<int>{2});
}

TEST_CASE("nobody is behind when all agree, or when one rank alone is ahead", "[restart][behind]") {
  CHECK(restart::behindRanks({{0, {{7, 5}}}, {1, {{7, 5}}}}).empty());
  CHECK(restart::behindRanks({{0, {{7, 6}}}, {1, {{7, 5}}}}).empty());
  CHECK(restart::behindRanks({}).empty());
}

TEST_CASE("published counts read back per rank", "[restart][behind]") {
  store::MemoryStore store;
  const restart::protocol::JobKeys keys("job");
  restart::publishCommProgress(store, keys, 3, 0, {{0xfeedfacecafebeefULL, 12}});
  restart::publishCommProgress(store, keys, 3, 2, {{0xfeedfacecafebeefULL, 11}});
  const auto read = restart::readCommProgress(store, keys, 3, {0, 1, 2});
  REQUIRE(read.size() == 2);
  CHECK(read.at(0).at(0xfeedfacecafebeefULL) == 12);
  CHECK(read.at(2).at(0xfeedfacecafebeefULL) == 11);
  CHECK_THROWS_AS(restart::decodeCommProgress("[1]"), std::invalid_argument);
  CHECK_THROWS_AS(restart::decodeCommProgress("{\"5\": -1}"), std::invalid_argument);
}
