// The stuck-rank comparison (jobhealth/stuck_ranks.h) over hand-made samples:
// who is named, when, and every healthy divergence it must leave alone (the
// first collective of a communicator, a rank that pings or declared itself
// busy, a rank waiting elsewhere, a sample not yet past the threshold).
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "jobhealth/json.h"
#include "jobhealth/stuck_ranks.h"

using namespace resilient::jobhealth;

namespace {

constexpr uint64_t kS = 1000000000ull;
constexpr uint64_t kComm = 0xc0ffee;
constexpr uint64_t kT0 = 1000 * kS;  // when the waiting ranks entered collective 5

// Three ranks of kComm; all did collectives 1..4; ranks 0 and 2 are inside
// collective 5 since kT0; rank 1 has not entered it. Samples taken at `now`.
std::vector<RankSample> samples(uint64_t now) {
  std::vector<RankSample> out(3);
  for (int r = 0; r < 3; ++r) {
    RankSample& s = out[static_cast<size_t>(r)];
    s.rank = r;
    s.pid = 100 + static_cast<uint32_t>(r);
    s.host = "node";
    s.wallNs = now;
    s.lastPingWallNs = kT0 - kS;  // pinged after collective 4, a second before
    for (uint64_t i = 1; i <= 4; ++i) {
      s.arrivals.push_back({kComm, i, r, 3, kT0 - (5 - i) * kS, 0, "AllReduce"});
    }
    if (r != 1) {
      s.inside.push_back({kComm, 5, kT0 + static_cast<uint64_t>(r) * 1000, "AllReduce"});
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a live rank that never enters the collective its peers wait in is named once the "
    "threshold passes",
    "[stuck]") {
  StuckRankDetector d({.timeoutNs = 10 * kS});
  CHECK(d.update(samples(kT0 + 5 * kS)).empty());  // waited 5 s
  CHECK(d.update(samples(kT0 + 9 * kS)).empty());  // 9 s
  const auto found = d.update(samples(kT0 + 11 * kS));
  REQUIRE(found.size() == 1);
  const HealthReport& r = found[0];
  CHECK(r.kind == HealthReport::Kind::kStuckRank);
  CHECK(r.subject.rank == 1);
  CHECK(r.subject.pid == 101);
  CHECK(r.commId == kComm);
  CHECK(r.collIndex == 5);
  CHECK(r.function == "AllReduce");
  CHECK(r.waitingRanks == 2);
  CHECK(r.waitedNs == 11 * kS);
  CHECK(describe(r).find("stuck rank rank 1 (node pid 101)") != std::string::npos);
  CHECK(describe(r).find("collective 5 (AllReduce)") != std::string::npos);
  // Named once for that collective.
  CHECK(d.update(samples(kT0 + 12 * kS)).empty());
  // The record and the JSON say the same.
  CHECK(toBlackboxRecord(r).faultClass == RESILIENT_BLACKBOX_FAULT_STUCK_RANK);
  const auto back = reportFromJson(reportJson(r));
  REQUIRE(back.ok());
  CHECK(back->kind == HealthReport::Kind::kStuckRank);
  CHECK(back->collIndex == 5);
  CHECK(back->function == "AllReduce");
  CHECK(back->waitedNs == r.waitedNs);
  CHECK(back->waitingRanks == 2);
}

TEST_CASE("a sample round trip keeps what the stuck-rank comparison reads", "[stuck]") {
  const RankSample s = samples(kT0 + kS)[0];
  const auto back = sampleFromJson(sampleJson(s));
  REQUIRE(back.ok());
  REQUIRE(back->inside.size() == 1);
  CHECK(back->inside[0].collIndex == 5);
  CHECK(back->inside[0].function == "AllReduce");
  CHECK(back->lastPingWallNs == s.lastPingWallNs);
  CHECK(back->arrivals.size() == 4);
  CHECK(back->arrivals[3].function == "AllReduce");
}

TEST_CASE("healthy divergences are never named", "[stuck]") {
  StuckRankDetector d({.timeoutNs = 10 * kS});
  std::vector<RankSample> s = samples(kT0 + 30 * kS);
  SECTION("a rank that pings (a checkpoint writer that says it is working)") {
    s[1].lastPingWallNs = kT0 + 25 * kS;
    CHECK(d.update(s).empty());
  }
  SECTION("a rank with hang protection off") {
    s[1].waitingDeclared = true;
    CHECK(d.update(s).empty());
  }
  SECTION("a rank inside another collective: a victim further down the chain") {
    s[1].inside.push_back({0xbeef, 7, kT0, "Broadcast"});
    CHECK(d.update(s).empty());
  }
  SECTION("the first collective of a communicator (after a restart, every start-up)") {
    for (auto& r : s) {
      r.arrivals.clear();
    }
    for (auto& r : s) {
      for (auto& i : r.inside) {
        i.collIndex = 1;
      }
    }
    CHECK(d.update(s).empty());
  }
  SECTION("nobody waits") {
    for (auto& r : s) {
      r.inside.clear();
    }
    CHECK(d.update(s).empty());
  }
  SECTION("the rank's own sample is older than the threshold after the others began") {
    s[1].wallNs = kT0 + 9 * kS;
    CHECK(d.update(s).empty());
  }
}

TEST_CASE("with every condition but one met, the one makes the difference", "[stuck]") {
  // The sections above must not pass for a reason of their own: the same
  // samples without the exception are named.
  StuckRankDetector d({.timeoutNs = 10 * kS});
  CHECK(d.update(samples(kT0 + 30 * kS)).size() == 1);
}
