// The soft and hard timeout decisions over status page views.
#include <catch2/catch.hpp>

#include "restart/monitor/progress_timeouts.h"

namespace rm = resilient::restart::monitor;
using resilient::restart::protocol::RankPhase;
using rm::TimeoutAction;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kStart = 1000 * kMs;

rm::ProgressView running(uint64_t lastProgress, int iteration = 0) {
  rm::ProgressView v;
  v.phase = RankPhase::kRunning;
  v.iteration = iteration;
  v.lastProgressNs = lastProgress;
  return v;
}

}  // namespace

TEST_CASE("soft, then hard, from the last progress", "[monitor][timeouts]") {
  rm::ProgressTimeouts t(milliseconds(100), milliseconds(300), milliseconds(1000), kStart);
  const uint64_t progress = kStart + 50 * kMs;
  CHECK(t.check(running(progress), progress + 99 * kMs) == TimeoutAction::kNone);
  CHECK(t.check(running(progress), progress + 100 * kMs) == TimeoutAction::kSoft);
  // Until enforced, still due; then once per iteration.
  CHECK(t.check(running(progress), progress + 150 * kMs) == TimeoutAction::kSoft);
  t.softDone(0);
  CHECK(t.check(running(progress), progress + 200 * kMs) == TimeoutAction::kNone);
  CHECK(t.check(running(progress), progress + 300 * kMs) == TimeoutAction::kHard);
  // A new iteration arms the soft timeout again.
  CHECK(t.check(running(progress, 1), progress + 150 * kMs) == TimeoutAction::kSoft);
  CHECK(t.idleNs(running(progress), progress + 42 * kMs) == 42 * kMs);
}

TEST_CASE("no progress stamp yet: the clock starts with the monitor", "[monitor][timeouts]") {
  rm::ProgressTimeouts t(milliseconds(100), milliseconds(300), milliseconds(1000), kStart);
  CHECK(t.check(running(0), kStart + 99 * kMs) == TimeoutAction::kNone);
  CHECK(t.check(running(0), kStart + 100 * kMs) == TimeoutAction::kSoft);
}

TEST_CASE("the soft timeout applies while running only", "[monitor][timeouts]") {
  rm::ProgressTimeouts t(milliseconds(100), milliseconds(300), milliseconds(1000), kStart);
  auto v = running(kStart);
  v.phase = RankPhase::kRestarting;
  CHECK(t.check(v, kStart + 200 * kMs) == TimeoutAction::kNone);
  CHECK(t.check(v, kStart + 300 * kMs) == TimeoutAction::kHard);
}

TEST_CASE("in a barrier the hard timeout is the barrier timeout", "[monitor][timeouts]") {
  rm::ProgressTimeouts t(milliseconds(100), milliseconds(300), milliseconds(1000), kStart);
  for (const RankPhase p :
       {RankPhase::kInitialBarrier, RankPhase::kIterationBarrier, RankPhase::kCompleting}) {
    auto v = running(kStart);
    v.phase = p;
    CHECK(t.check(v, kStart + 999 * kMs) == TimeoutAction::kNone);
    CHECK(t.check(v, kStart + 1000 * kMs) == TimeoutAction::kHard);
    CHECK(t.hardLimitNs(p) == 1000 * kMs);
  }
}

TEST_CASE("done, failed and disabled hang protection enforce nothing", "[monitor][timeouts]") {
  rm::ProgressTimeouts t(milliseconds(100), milliseconds(300), milliseconds(1000), kStart);
  for (const RankPhase p : {RankPhase::kDone, RankPhase::kFailed}) {
    auto v = running(kStart);
    v.phase = p;
    CHECK(t.check(v, kStart + 5000 * kMs) == TimeoutAction::kNone);
  }
  auto off = running(kStart);
  off.hangProtectionOff = true;
  CHECK(t.check(off, kStart + 5000 * kMs) == TimeoutAction::kNone);
  // Back on: the clock restarts from when protection was last seen off.
  CHECK(t.check(running(kStart), kStart + 5050 * kMs) == TimeoutAction::kNone);
  CHECK(t.check(running(kStart), kStart + 5100 * kMs) == TimeoutAction::kSoft);
}
