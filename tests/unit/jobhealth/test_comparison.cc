// The job's health comparison (jobhealth/slow_links.h, jobhealth/stragglers.h)
// on synthetic rounds of samples: a link far slower than its peers, or
// slower than its own history, is named once with both ends; a rank that
// enqueues most collectives last by more than the lag threshold is named;
// balanced links and ranks that take turns being last are not; the JSON of
// samples and reports round-trips and malformed input is refused; a report
// appended to a region is read back as a report, not a fault.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "jobhealth/json.h"
#include "jobhealth/slow_links.h"
#include "jobhealth/stragglers.h"
#include "tests/support/temp_dir.h"

using namespace resilient;
using jobhealth::HealthReport;
using jobhealth::RankSample;

namespace {

constexpr uint64_t kSecond = 1000000000ull;
constexpr uint64_t kMs = 1000000ull;

// A ring of `n` ranks on one host (pid 100 + r), each with one send link to
// r+1 and one receive link from r-1.
std::vector<RankSample> ring(int n) {
  std::vector<RankSample> out;
  for (int r = 0; r < n; ++r) {
    RankSample s;
    s.rank = r;
    s.pid = static_cast<uint32_t>(100 + r);
    s.host = "node";
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    s.links.push_back({7, true, "10.0.0." + std::to_string(r) + ":1",
                       "10.0.0." + std::to_string(next) + ":2", static_cast<uint32_t>(100 + next),
                       "node", 0, 0, 0});
    s.links.push_back({7, false, "10.0.0." + std::to_string(r) + ":2",
                       "10.0.0." + std::to_string(prev) + ":1", static_cast<uint32_t>(100 + prev),
                       "node", 0, 0, 0});
    out.push_back(s);
  }
  return out;
}

// Advances every link by `bytes` over `dt`; send links busy for the given
// fraction of it (receives always busy: they wait for their sender).
void advance(std::vector<RankSample>& ranks, uint64_t now, uint64_t bytes,
             const std::vector<double>& sendBusy, uint64_t dt) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].wallNs = now;
    for (auto& l : ranks[r].links) {
      l.bytes += bytes;
      l.busyNs += l.send ? static_cast<uint64_t>(sendBusy[r] * static_cast<double>(dt)) : dt;
    }
  }
}

}  // namespace

TEST_CASE("slow links: the one link far below its peers is named once, both ends", "[health]") {
  jobhealth::SlowLinkDetector d({.ratio = 0.3, .windowNs = 4 * kSecond});
  auto ranks = ring(4);
  std::vector<HealthReport> reports;
  uint64_t firstAt = 0;
  for (uint64_t t = 1; t <= 20; ++t) {
    // 10 MB/s through the ring; rank 2's link is busy all the time (it is
    // the limit), the others a twentieth of it.
    advance(ranks, t * kSecond, 10 << 20, {0.05, 0.05, 1.0, 0.05}, kSecond);
    for (auto& r : d.update(ranks)) {
      if (firstAt == 0) {
        firstAt = t;
      }
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  const HealthReport& r = reports[0];
  CHECK(r.kind == HealthReport::Kind::kSlowLink);
  CHECK(r.subject.rank == 2);
  CHECK(r.subject.pid == 102);
  CHECK(r.subject.address == "10.0.0.2:1");
  CHECK(r.peer.rank == 3);
  CHECK(r.peer.pid == 103);
  CHECK(r.peer.address == "10.0.0.3:2");
  CHECK(r.ratio < 0.3);
  CHECK_FALSE(r.againstHistory);
  // A full window of data, then half a window below: 4 s + 2 s after the first sample.
  CHECK(firstAt <= 8);
  const std::string text = jobhealth::describe(r);
  CHECK(text.find("slow link from rank 2 (node pid 102 10.0.0.2:1) to rank 3") !=
        std::string::npos);
  // The live view marks it.
  bool marked = false;
  for (const auto& s : d.standings()) {
    marked = marked || (s.slow && s.from.rank == 2);
    CHECK((s.slow == (s.from.rank == 2)));
  }
  CHECK(marked);
}

TEST_CASE("slow links: a link backed up by its receiver's slower link is left to that link",
          "[health]") {
  // health_soak --slow-rank 3 (rank 3 sends at 2 MB/s) under CI load: the
  // link into rank 3 backed up as rank 3 stopped draining it, busy a third of
  // the time at 6 MB/s, and was named next to rank 3's own link.
  jobhealth::SlowLinkDetector d({.ratio = 0.4, .windowNs = 4 * kSecond});
  auto ranks = ring(5);
  std::vector<HealthReport> reports;
  for (uint64_t t = 1; t <= 20; ++t) {
    advance(ranks, t * kSecond, 2 << 20, {0, 0, 1.0 / 3, 1.0, 0}, kSecond);
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].subject.rank == 3);
  CHECK(reports[0].peer.rank == 4);
  for (const auto& s : d.standings()) {
    CHECK((s.slow == (s.from.rank == 3)));
  }
  // The link into rank 3 slower than rank 3's own: both its own.
  jobhealth::SlowLinkDetector e({.ratio = 0.4, .windowNs = 4 * kSecond});
  ranks = ring(5);
  reports.clear();
  for (uint64_t t = 1; t <= 20; ++t) {
    advance(ranks, t * kSecond, 2 << 20, {0, 0, 1.0, 0.5, 0}, kSecond);
    for (auto& r : e.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 2);
}

TEST_CASE("slow links: a link hovering at the threshold is reported once; again after recovering",
          "[health]") {
  jobhealth::SlowLinkDetector d({.ratio = 0.3, .windowNs = 2 * kSecond});
  auto ranks = ring(4);
  int reports = 0;
  uint64_t t = 0;
  const auto run = [&](int seconds, const std::vector<double>& busy) {
    for (int i = 0; i < seconds; ++i) {
      ++t;
      advance(ranks, t * kSecond, 10 << 20, busy, kSecond);
      reports += static_cast<int>(d.update(ranks).size());
    }
  };
  // Rank 2's link needs 5x the busy time of the others: a ratio of 0.2.
  run(10, {0.2, 0.2, 1.0, 0.2});
  CHECK(reports == 1);
  // Hovering: a ratio of 0.2, then 0.4 (above), every other second.
  for (int i = 0; i < 6; ++i) {
    run(1, {0.2, 0.2, 1.0, 0.2});
    run(1, {0.4, 0.4, 1.0, 0.4});
  }
  CHECK(reports == 1);
  // Recovered for longer than a window, then slow again: a second report.
  run(8, {0.5, 0.5, 0.5, 0.5});
  run(10, {0.2, 0.2, 1.0, 0.2});
  CHECK(reports == 2);
}

TEST_CASE("slow links: balanced links, idle links and brief dips are not reported", "[health]") {
  jobhealth::SlowLinkDetector d({.ratio = 0.3, .windowNs = 4 * kSecond});
  auto ranks = ring(4);
  for (uint64_t t = 1; t <= 30; ++t) {
    // Busy shares that wander between 40 % and 60 %: the same speed.
    const double w = 0.1 * static_cast<double>(t % 3);
    advance(ranks, t * kSecond, 10 << 20, {0.4 + w, 0.6 - w, 0.5, 0.45 + w}, kSecond);
    CHECK(d.update(ranks).empty());
  }
  // Idle for a while: nothing moves, nothing to compare.
  for (uint64_t t = 31; t <= 40; ++t) {
    advance(ranks, t * kSecond, 0, {0, 0, 0, 0}, kSecond);
    CHECK(d.update(ranks).empty());
  }
  // One second of one slow link is under the window: not reported.
  for (uint64_t t = 41; t <= 60; ++t) {
    const double busy = t == 45 ? 1.0 : 0.5;
    advance(ranks, t * kSecond, 10 << 20, {0.5, busy, 0.5, 0.5}, kSecond);
    CHECK(d.update(ranks).empty());
  }
}

TEST_CASE("slow links: a link that falls far below its own history is named", "[health]") {
  jobhealth::SlowLinkDetector d({.ratio = 0.3, .windowNs = 2 * kSecond});
  // Two ranks: one link each way, no peers to compare with.
  auto ranks = ring(2);
  std::vector<HealthReport> reports;
  for (uint64_t t = 1; t <= 30; ++t) {
    // 100 MB/s while busy, then from t = 15 the link of rank 0 moves a
    // tenth of it in the same busy time.
    const uint64_t bytes = t < 15 ? (50 << 20) : (5 << 20);
    advance(ranks, t * kSecond, bytes, {0.5, t < 15 ? 0.5 : 0.0}, kSecond);
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].againstHistory);
  CHECK(reports[0].subject.rank == 0);
  CHECK(reports[0].ratio < 0.3);
}

namespace {

// Each rank's arrivals at collective `index`: base + offset[r].
void arrive(std::vector<RankSample>& ranks, uint64_t index, uint64_t base,
            const std::vector<uint64_t>& offset) {
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r) {
    ranks[static_cast<size_t>(r)].arrivals = {
        {9, index, r, n, base + offset[static_cast<size_t>(r)], 0, "AllReduce"}};
    ranks[static_cast<size_t>(r)].wallNs = base + offset[static_cast<size_t>(r)];
  }
}

}  // namespace

TEST_CASE("stragglers: a rank persistently last by more than the threshold is named", "[health]") {
  jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  auto ranks = ring(4);
  std::vector<HealthReport> reports;
  for (uint64_t i = 1; i <= 60; ++i) {
    // Every 200 ms; rank 1 is 50 ms late, except every fifth time.
    const uint64_t late = i % 5 == 0 ? 0 : 50 * kMs;
    arrive(ranks, i, i * 200 * kMs, {i % 3 * kMs, late, 2 * kMs, (i + 1) % 3 * kMs});
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == HealthReport::Kind::kStraggler);
  CHECK(reports[0].subject.rank == 1);
  CHECK(reports[0].subject.pid == 101);
  CHECK(reports[0].lagNs >= 45 * kMs);
  CHECK(reports[0].lastCount >= 6);
  CHECK(jobhealth::describe(reports[0]).find("straggler rank 1") != std::string::npos);
}

TEST_CASE("stragglers: a step of several collectives: the one after the compute shows it",
          "[health]") {
  // Each step all-reduces twice: the delayed rank comes late to the first
  // one only; the second starts level. It is last in half of the
  // collectives, and in all of those that waited for someone.
  jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  auto ranks = ring(4);
  std::vector<HealthReport> reports;
  uint64_t index = 0;
  for (uint64_t step = 1; step <= 40; ++step) {
    const uint64_t base = step * 200 * kMs;
    arrive(ranks, ++index, base, {step % 2 * kMs, 2 * kMs, 100 * kMs, 1 * kMs});
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
    arrive(ranks, ++index, base + 110 * kMs, {step % 3 * kMs, 0, 1 * kMs, 2 * kMs});
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].subject.rank == 2);
  CHECK(reports[0].waited == reports[0].lastCount);
  CHECK(reports[0].collectives >= 2 * reports[0].waited - 2);
  CHECK(jobhealth::describe(reports[0]).find("collectives that waited 20 ms or more") !=
        std::string::npos);
}

TEST_CASE("stragglers: last because the previous collective ended late is not its own doing",
          "[health]") {
  // Rank 2 is fed by a slow link: it finishes every collective 30 ms after
  // the others and enqueues the next one as promptly as they do. Last to
  // arrive every time, by 30 ms, and not a straggler. The same arrivals with
  // rank 2 taking 30 ms longer since its own previous end: a straggler.
  for (const bool ownDelay : {false, true}) {
    jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
    auto ranks = ring(4);
    int reports = 0;
    for (uint64_t i = 1; i <= 60; ++i) {
      const uint64_t base = i * 200 * kMs;
      for (int r = 0; r < 4; ++r) {
        const uint64_t late = r == 2 ? 30 * kMs : 0;
        const uint64_t end = base - 50 * kMs + (ownDelay ? 0 : late);  // previous end
        auto& a = ranks[static_cast<size_t>(r)];
        a.arrivals = {{9, i, r, 4, base + late, i > 1 ? end : 0, "AllReduce"}};
        a.wallNs = base + late;
      }
      reports += static_cast<int>(d.update(ranks).size());
    }
    CAPTURE(ownDelay);
    CHECK(reports == (ownDelay ? 1 : 0));
  }
}

TEST_CASE("stragglers: ranks taking turns, or always last by little, are not named", "[health]") {
  jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  auto ranks = ring(4);
  for (uint64_t i = 1; i <= 100; ++i) {
    std::vector<uint64_t> offset(4, 0);
    offset[i % 4] = 60 * kMs;  // a different rank late each time
    arrive(ranks, i, i * 200 * kMs, offset);
    CHECK(d.update(ranks).empty());
  }
  jobhealth::StragglerDetector e({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  for (uint64_t i = 1; i <= 100; ++i) {
    arrive(ranks, i, i * 200 * kMs, {0, 0, 0, 3 * kMs});  // always last, by 3 ms
    CHECK(e.update(ranks).empty());
  }
  // Compared, every one of them: none waited 20 ms for its last rank.
  CHECK(e.compared() == 100);
  for (const auto& s : e.standings()) {
    CHECK_FALSE(s.straggler);
  }
}

TEST_CASE("stragglers: an arrival shipped twice counts once; a rank gone leaves no verdict",
          "[health]") {
  jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  auto ranks = ring(3);
  for (uint64_t i = 1; i <= 20; ++i) {
    arrive(ranks, i, i * 200 * kMs, {0, 0, 100 * kMs});
    // Rank 2 never reports: its collectives never complete.
    ranks[2].arrivals.clear();
    CHECK(d.update(ranks).empty());
    CHECK(d.update(ranks).empty());
  }
}

namespace {

// Rank r's host clock is off by skew[r]; its GPU waited sync[r] at the
// collective's opening barrier (0: unknown).
void arriveTimed(std::vector<RankSample>& ranks, uint64_t index, uint64_t base,
                 const std::vector<int64_t>& skew, const std::vector<uint64_t>& sync) {
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<size_t>(r);
    const auto wall = static_cast<uint64_t>(static_cast<int64_t>(base) + skew[i]);
    ranks[i].arrivals = {{9, index, r, n, wall, 0, "AllReduce", sync[i]}};
    ranks[i].wallNs = wall;
  }
}

}  // namespace

TEST_CASE(
    "stragglers: where every rank has its GPU-timed sync wait, the one that waited least is "
    "last, whatever the wall clocks say",
    "[health][gpu-sync]") {
  // Rank 1's GPU reaches each collective 50 ms after the others: they wait
  // ~50 ms at the opening barrier, it waits ~10 us. Its host clock runs 60 ms
  // behind, and rank 3's 80 ms ahead: by the wall clock rank 3 is last every
  // time and rank 1 early.
  const std::vector<int64_t> skew = {0, -60 * static_cast<int64_t>(kMs), 0,
                                     80 * static_cast<int64_t>(kMs)};
  for (const bool gpuTimed : {true, false}) {
    CAPTURE(gpuTimed);
    jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
    auto ranks = ring(4);
    std::vector<HealthReport> reports;
    for (uint64_t i = 1; i <= 40; ++i) {
      const std::vector<uint64_t> sync = {50 * kMs + i * 1000, 10000, 49 * kMs, 51 * kMs};
      arriveTimed(ranks, i, i * 200 * kMs, skew, gpuTimed ? sync : std::vector<uint64_t>(4, 0));
      for (auto& r : d.update(ranks)) {
        reports.push_back(r);
      }
    }
    REQUIRE(reports.size() == 1);
    if (gpuTimed) {
      CHECK(reports[0].subject.rank == 1);
      // The median of the others' waits (50 ms and a little) minus its 10 us.
      CHECK(reports[0].lagNs >= 49 * kMs);
      CHECK(reports[0].lagNs <= 51 * kMs);
      CHECK(reports[0].lastCount >= 8);
    } else {
      CHECK(reports[0].subject.rank == 3);  // the wall-clock rule, fooled by the clocks
    }
  }
}

TEST_CASE("stragglers: a rank without the sync wait leaves the collective to the wall clock",
          "[health][gpu-sync]") {
  // The GPU waits point at rank 1, but rank 0 does not know its own (an older
  // build, a classic kernel): the wall clock names rank 2, 40 ms late.
  jobhealth::StragglerDetector d({.minLagNs = 20 * kMs, .windowNs = 10 * kSecond});
  auto ranks = ring(3);
  std::vector<HealthReport> reports;
  for (uint64_t i = 1; i <= 20; ++i) {
    arriveTimed(ranks, i, i * 200 * kMs, {0, 0, 40 * static_cast<int64_t>(kMs)},
                {0, 10000, 45 * kMs});
    for (auto& r : d.update(ranks)) {
      reports.push_back(r);
    }
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].subject.rank == 2);
}

TEST_CASE("health samples: the sync wait of a completed collective of a symmetric kernel only",
          "[health][gpu-sync]") {
  blackbox::Snapshot snap;
  snap.header.pid = 7;
  blackbox::CommView view;
  view.comm.commId = 9;
  view.comm.rank = 1;
  view.comm.nranks = 2;
  const auto op = [](uint64_t index, uint32_t state, uint32_t flags) {
    resilient_blackbox_op o{};
    o.kind = RESILIENT_BLACKBOX_OP_COLL;
    o.collIndex = index;
    o.state = state;
    o.enqueueMonoNs = 1000 * index;
    o.syncWaitNs = 5000 + index;
    o.opFlags = flags;
    return o;
  };
  view.flight = {op(1, RESILIENT_BLACKBOX_OP_COMPLETED, RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC),
                 op(2, RESILIENT_BLACKBOX_OP_COMPLETED, 0),
                 op(3, RESILIENT_BLACKBOX_OP_ABANDONED, RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC)};
  snap.comms.push_back(view);
  const RankSample s = jobhealth::sampleOf(snap, 1);
  REQUIRE(s.arrivals.size() == 3);
  CHECK(s.arrivals[0].syncWaitNs == 5001);
  CHECK(s.arrivals[1].syncWaitNs == 0);  // a classic kernel's initial sync is no wait for peers
  CHECK(s.arrivals[2].syncWaitNs == 0);  // not every channel reported
}

TEST_CASE("health JSON: samples and reports round-trip; malformed ones are refused", "[health]") {
  auto ranks = ring(2);
  ranks[0].arrivals = {{9, 4, 0, 2, 123, 99, "AllReduce", 4567}};
  ranks[0].links[0].rttNs = 55;
  const auto back = jobhealth::sampleFromJson(jobhealth::sampleJson(ranks[0]));
  REQUIRE(back.ok());
  CHECK(back->links.size() == 2);
  CHECK(back->links[0].rttNs == 55);
  CHECK(back->links[0].peer == ranks[0].links[0].peer);
  REQUIRE(back->arrivals.size() == 1);
  CHECK(back->arrivals[0].wallNs == 123);
  CHECK(back->arrivals[0].prevEndWallNs == 99);
  CHECK(back->arrivals[0].syncWaitNs == 4567);
  // A sample of a build before the sync wait: seven members, the wait unknown.
  nlohmann::json olderJson = jobhealth::sampleJson(ranks[0]);
  olderJson["arrivals"][0].erase(7);
  const auto older = jobhealth::sampleFromJson(olderJson);
  REQUIRE(older.ok());
  REQUIRE(older->arrivals.size() == 1);
  CHECK(older->arrivals[0].prevEndWallNs == 99);
  CHECK(older->arrivals[0].function == "AllReduce");
  CHECK(older->arrivals[0].syncWaitNs == 0);
  nlohmann::json longer = jobhealth::sampleJson(ranks[0]);
  longer["arrivals"][0].push_back(1);  // nine members
  CHECK_FALSE(jobhealth::sampleFromJson(longer).ok());

  HealthReport r;
  r.kind = HealthReport::Kind::kStraggler;
  r.subject = {3, "h", 9, ""};
  r.lagNs = 77;
  r.waited = 5;
  r.minLagNs = 20;
  const auto rb = jobhealth::reportFromJson(jobhealth::reportJson(r));
  REQUIRE(rb.ok());
  CHECK(rb->subject.rank == 3);
  CHECK(rb->lagNs == 77);
  CHECK(rb->waited == 5);
  CHECK(rb->minLagNs == 20);

  CHECK_FALSE(jobhealth::sampleFromJson(nlohmann::json::parse(R"({"rank": 1})")).ok());
  CHECK_FALSE(
      jobhealth::sampleFromJson(
          nlohmann::json::parse(
              R"({"rank":1,"pid":2,"host":"h","wall_ns":3,"links":[],"arrivals":[[1,2,3,4,5]]})"))
          .ok());
  CHECK_FALSE(jobhealth::reportFromJson(nlohmann::json::parse(R"({"kind": "gremlin"})")).ok());
  CHECK_FALSE(jobhealth::sampleFromJson(nlohmann::json::parse("[]")).ok());
}

TEST_CASE("a report appended to a region reads back as a report, numbered with the faults",
          "[health]") {
  test::TempDir dir;
  blackbox::Layout layout;
  layout.flightOps = 8;
  auto w = blackbox::Writer::create(dir.path().string(), "node", layout);
  REQUIRE(w.ok());
  resilient_blackbox_fault f{};
  f.faultClass = RESILIENT_BLACKBOX_FAULT_PEER_EXITED;
  (*w)->recordFault(f);
  HealthReport r;
  r.subject = {1, "node", 42, "a:1"};
  r.peer = {2, "node", 43, "b:2"};
  REQUIRE(blackbox::recordReport((*w)->path(), jobhealth::toBlackboxRecord(r)).ok());
  const auto snap = blackbox::readRegion((*w)->path());
  REQUIRE(snap.ok());
  REQUIRE(snap->faults.size() == 2);
  CHECK(snap->faults[1].number == 2);
  CHECK(snap->faults[1].faultClass == RESILIENT_BLACKBOX_FAULT_SLOW_LINK);
  CHECK(RESILIENT_BLACKBOX_IS_REPORT(snap->faults[1].faultClass));
  CHECK_FALSE(RESILIENT_BLACKBOX_IS_REPORT(snap->faults[0].faultClass));
  CHECK(std::string(snap->faults[1].text).find("slow link from rank 1") != std::string::npos);
  CHECK(snap->faults[1].peerPid == 42);
}
