// The progress monitor of the net plugin, driven as the watchdog thread
// drives it (observe, then the stuck check, for each connection with
// requests outstanding at a tick) with a fake clock: no sleeps.
#include <cstdint>
#include <optional>

#include <catch2/catch.hpp>

#include "plugin/net/progress_monitor.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/net/watchdog_harness.h"

using namespace resilient;
using namespace resilient::net;
using resilient::test::FakeClock;
using resilient::test::RecordingSink;
using resilient::test::TestConnection;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kTickMs = 10;

// The watchdog's look at one connection at a tick. `bytes`: what the inner
// transport says it moved (nullopt: it cannot tell).
void tick(ProgressMonitor& monitor, ConnectionRecord& conn, uint64_t now,
          std::optional<uint64_t> bytes = std::nullopt) {
  if (conn.fault() != nullptr || conn.outstanding() == 0) {
    return;
  }
  monitor.observe(conn, bytes, now);
  monitor.failIfStuck(conn, now, ProgressMonitor::PeerLiveness::kAnswering);
}

// Ticks for `ms` with nothing moving.
void idleFor(FakeClock& clock, ProgressMonitor& monitor, ConnectionRecord& conn, uint64_t ms,
             std::optional<uint64_t> bytes = std::nullopt) {
  for (uint64_t t = 0; t < ms; t += kTickMs) {
    tick(monitor, conn, clock.monoNs(), bytes);
    clock.advanceMs(kTickMs);
  }
}

}  // namespace

TEST_CASE("progress: no progress past the timeout with requests outstanding is 'peer stuck'",
          "[net][progress]") {
  FakeClock clock;
  RecordingSink sink(&clock);
  ProgressMonitor monitor(300, sink);
  TestConnection conn("10.1.2.3:5000");
  conn.post();
  const uint64_t start = clock.monoNs();
  tick(monitor, *conn, clock.monoNs());
  CHECK(conn->lastProgressNs() == start);  // the first busy look stamps progress

  // Up to the timeout itself: no fault.
  while (clock.monoNs() <= start + 300 * kMs) {
    tick(monitor, *conn, clock.monoNs());
    clock.advanceMs(kTickMs);
  }
  CHECK(sink.reports.empty());
  tick(monitor, *conn, clock.monoNs());
  REQUIRE(sink.reports.size() == 1);
  CHECK(sink.reports[0].conn == conn.get());
  CHECK(sink.reports[0].fault.cls == FaultClass::kPeerStuck);
  CHECK(sink.reports[0].fault.detail ==
        "no bytes moved for 310 ms (threshold 300 ms) while the peer answers heartbeats");
  CHECK(sink.reports[0].atNs == start + 310 * kMs);
  // Reported once: the connection carries its fault.
  idleFor(clock, monitor, *conn, 1000);
  CHECK(sink.reports.size() == 1);

  // Without a liveness link nothing says the peer answers heartbeats, and the
  // explanation must not claim it.
  TestConnection unlinked("10.1.2.3:5001");
  unlinked.post();
  monitor.observe(*unlinked, std::nullopt, clock.monoNs());
  clock.advanceMs(400);
  CHECK(monitor.failIfStuck(*unlinked, clock.monoNs(), ProgressMonitor::PeerLiveness::kUnknown));
  REQUIRE(sink.reports.size() == 2);
  CHECK(sink.reports[1].fault.detail ==
        "no bytes moved for 400 ms (threshold 300 ms) and no liveness link to the peer: whether "
        "its process lives is unknown");
}

TEST_CASE("progress: moving bytes or completing requests resets the timeout", "[net][progress]") {
  FakeClock clock;
  RecordingSink sink(&clock);
  ProgressMonitor monitor(300, sink);
  TestConnection conn;
  conn.post();
  conn.post();

  SECTION("bytes moved by the inner transport") {
    uint64_t bytes = 1000;
    for (int i = 0; i < 20; ++i) {  // 4 s, bytes moving every 200 ms
      idleFor(clock, monitor, *conn, 200, bytes);
      bytes += 4096;
    }
    CHECK(sink.reports.empty());
    idleFor(clock, monitor, *conn, 100, bytes);  // a new count: stamped at the first look
    const uint64_t last = conn->lastProgressNs();
    // The same count is no progress; neither is a transport that cannot tell.
    idleFor(clock, monitor, *conn, 100, bytes);
    idleFor(clock, monitor, *conn, 100);
    CHECK(conn->lastProgressNs() == last);
    CHECK(sink.reports.empty());
    idleFor(clock, monitor, *conn, 20, bytes);
    REQUIRE(sink.reports.size() == 1);
    CHECK(sink.reports[0].fault.cls == FaultClass::kPeerStuck);
  }
  SECTION("a request completed while another is outstanding") {
    idleFor(clock, monitor, *conn, 250);
    conn.complete();
    idleFor(clock, monitor, *conn, 250);
    CHECK(sink.reports.empty());
    idleFor(clock, monitor, *conn, 70);
    REQUIRE(sink.reports.size() == 1);
    CHECK(sink.reports[0].fault.detail.find("no bytes moved for 310 ms") == 0);
  }
}

TEST_CASE("progress: a progress timeout of 0 disables the check", "[net][progress]") {
  FakeClock clock;
  RecordingSink sink(&clock);
  ProgressMonitor monitor(0, sink);
  TestConnection conn;
  conn.post();
  idleFor(clock, monitor, *conn, 3600ull * 1000);
  CHECK(sink.reports.empty());
  CHECK(conn->fault() == nullptr);
  CHECK(conn->lastProgressNs() != 0);  // still stamped: the messages and the blackbox show it
}

TEST_CASE("progress: a connection idle longer than the timeout is not stuck once busy again",
          "[net][progress]") {
  FakeClock clock;
  RecordingSink sink(&clock);
  ProgressMonitor monitor(300, sink);
  TestConnection conn;
  conn.post();
  idleFor(clock, monitor, *conn, 200);
  conn.complete();
  // Idle (nothing outstanding: the watchdog does not look) for far longer
  // than the timeout.
  idleFor(clock, monitor, *conn, 5000);
  CHECK(sink.reports.empty());
  // Busy again: the new busy period counts from its own start.
  conn.post();
  const uint64_t busyAgain = clock.monoNs();
  idleFor(clock, monitor, *conn, 300);
  CHECK(sink.reports.empty());
  CHECK(conn->lastProgressNs() == busyAgain);
  idleFor(clock, monitor, *conn, 20);
  REQUIRE(sink.reports.size() == 1);
  CHECK(sink.reports[0].fault.cls == FaultClass::kPeerStuck);
}
