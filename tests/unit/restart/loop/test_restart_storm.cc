// The restart-storm policy (restart/loop/restart_storm.h) on its own: the
// window, the back-off's doubling and cap, the terminal verdict and its text.
#include <catch2/catch.hpp>

#include "restart/loop/restart_storm.h"

using namespace resilient::restart;
using std::chrono::milliseconds;

namespace {

std::vector<protocol::FaultRecord> fault(int iteration, int culprit, const std::string& detail) {
  protocol::FaultRecord r;
  r.iteration = iteration;
  r.reason = protocol::FaultReason::kException;
  r.reporter = culprit;
  r.subject = culprit;
  r.culprit = culprit;
  r.detail = detail;
  return {r};
}

}  // namespace

TEST_CASE("restart storms: the first restart is free, the next ones back off, doubling",
          "[loop][storm]") {
  RestartStorm storm(StormPolicy{5, milliseconds(60000), milliseconds(100), milliseconds(350)});
  CHECK(storm.restart(0, 1000, fault(0, 1, "boom")).backoff == milliseconds(0));
  CHECK(storm.restart(1, 2000, fault(1, 1, "boom")).backoff == milliseconds(100));
  CHECK(storm.restart(2, 3000, fault(2, 1, "boom")).backoff == milliseconds(200));
  CHECK(storm.restart(3, 4000, fault(3, 1, "boom")).backoff == milliseconds(350));  // the cap
  const auto fifth = storm.restart(4, 5000, fault(4, 1, "boom"));
  CHECK_FALSE(fifth.stop);
  CHECK(fifth.inWindow == 5);
  // The sixth within the window ends the job, naming what recurred: the
  // same reason from the same rank, its details aside (they name the
  // iteration, a step, an address); the latest one's text is shown.
  const auto sixth = storm.restart(5, 6000, fault(5, 2, "other"));
  REQUIRE(sixth.stop);
  CHECK(sixth.message ==
        "restart storm: 6 restarts within 60000 ms (limit 5, iterations 0 to 5); the recurring "
        "fault, 5 times: exception reported by rank 1 (culprit rank 1): boom");
  RestartStorm varied(StormPolicy{1, milliseconds(60000), milliseconds(0), milliseconds(0)});
  (void)varied.restart(0, 0, fault(0, 1, "throws in iteration 0"));
  CHECK(varied.restart(1, 1, fault(1, 1, "throws in iteration 1")).message.find(
            "the recurring fault, 2 times: exception reported by rank 1 (culprit rank 1): throws in "
            "iteration 1") != std::string::npos);
}

TEST_CASE("restart storms: restarts older than the window no longer count", "[loop][storm]") {
  RestartStorm storm(StormPolicy{2, milliseconds(1000), milliseconds(100), milliseconds(1000)});
  CHECK_FALSE(storm.restart(0, 0, fault(0, 1, "a")).stop);
  CHECK_FALSE(storm.restart(1, 700, fault(1, 1, "a")).stop);
  const auto later = storm.restart(2, 1600, fault(2, 1, "a"));  // the first left the window
  CHECK_FALSE(later.stop);
  CHECK(later.inWindow == 2);
  CHECK(storm.restart(3, 1650, fault(3, 1, "a")).stop);
}

TEST_CASE("restart storms: limit 0 never stops", "[loop][storm]") {
  RestartStorm storm(StormPolicy{0, milliseconds(1000000), milliseconds(0), milliseconds(0)});
  for (int i = 0; i < 1000; ++i) {
    const auto v = storm.restart(i, i, fault(i, 0, "x"));
    REQUIRE_FALSE(v.stop);
    REQUIRE(v.backoff == milliseconds(0));
  }
}

TEST_CASE("restart storms: a process that joined counts the restarts before it",
          "[loop][storm][join]") {
  RestartStorm storm(StormPolicy{3, milliseconds(60000), milliseconds(100), milliseconds(1000)});
  storm.remember(0, 1000, fault(0, 1, "boom"));
  storm.remember(1, 2000, fault(1, 1, "boom"));
  const auto third = storm.restart(2, 3000, fault(2, 1, "boom"));
  CHECK(third.inWindow == 3);
  CHECK(third.backoff == milliseconds(200));
  CHECK(storm.restart(3, 4000, fault(3, 1, "boom")).stop);
  // Restarts older than the window are forgotten as the others forget them.
  RestartStorm late(StormPolicy{3, milliseconds(1000), milliseconds(100), milliseconds(1000)});
  late.remember(0, 1000, fault(0, 1, "boom"));
  CHECK(late.restart(1, 5000, fault(1, 1, "boom")).inWindow == 1);
}
