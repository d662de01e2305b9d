// The hang detector with a fake clock: replayed streams where a channel never
// finishes, where the proxy thread goes silent, and where progress is slow
// but steady. Time only moves when the test moves it; the detector is
// scanned at its own interval, as the plugin's thread would.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi_driver.h"
#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "event_stream.h"
#include "plugin/profiler/context.h"
#include "plugin_scope.h"
#include "resilient/blackbox.h"
#include "tests/support/temp_dir.h"

namespace resilient::test {
namespace {

constexpr uint64_t kMs = 1000000;

// Drives a replay event by event on the fake clock (`stepNs` per event) and
// scans the detector whenever its interval has passed, like its thread.
class Clocked {
 public:
  Clocked(PluginScope& scope, Replay& replay) : scope_(scope), replay_(replay) {
    interval_ = PluginScope::plugin()->detector().intervalNs();
    next_ = scope_.clock.monoNs();
    due();
  }
  // `stepNs` after each event; `progressStepNs` (if set) after the proxy
  // progress thread's events instead.
  void events(const std::vector<Event>& ev, size_t from, size_t to, uint64_t stepNs,
              uint64_t progressStepNs = 0) {
    for (size_t i = from; i < to; ++i) {
      replay_.run(ev, i, i + 1, false);
      scope_.clock.advance(ev[i].thread == 1 && progressStepNs != 0 ? progressStepNs : stepNs);
      due();
    }
  }
  // Lets `ns` pass; returns the fake time of the first fault seen, or 0.
  uint64_t idle(uint64_t ns) {
    uint64_t first = 0;
    const uint64_t end = scope_.clock.monoNs() + ns;
    while (scope_.clock.monoNs() < end) {
      scope_.clock.advance(std::min<uint64_t>(kMs, end - scope_.clock.monoNs()));
      const size_t before = scope_.sink.size();
      due();
      if (first == 0 && scope_.sink.size() > before) {
        first = scope_.clock.monoNs();
      }
    }
    return first;
  }
  uint64_t interval() const { return interval_; }

 private:
  void due() {
    while (scope_.clock.monoNs() >= next_) {
      scope_.scan();
      next_ += interval_;
    }
  }
  PluginScope& scope_;
  Replay& replay_;
  uint64_t interval_ = 0;
  uint64_t next_ = 0;
};

// The index just after the last event of `events` that concerns operation
// `opId` or any of its descendants: the operation's last sign of progress.
size_t lastEventOf(const std::vector<Event>& events, int opId) {
  std::vector<bool> mine;
  size_t last = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (static_cast<size_t>(e.id) >= mine.size()) {
      mine.resize(static_cast<size_t>(e.id) + 1, false);
    }
    if (e.kind == EventKind::kStart &&
        (e.id == opId || (e.parent >= 0 && static_cast<size_t>(e.parent) < mine.size() &&
                          mine[static_cast<size_t>(e.parent)]))) {
      mine[static_cast<size_t>(e.id)] = true;
    }
    if (mine[static_cast<size_t>(e.id)]) {
      last = i + 1;
    }
  }
  return last;
}

}  // namespace

TEST_CASE(
    "a stream where one channel never stops yields exactly one hang fault naming the "
    "communicator, the operation and the channel, within the timeout + 200 ms",
    "[profiler][hang]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  TempDir dir;
  ScopeOptions o;
  o.collTimeoutMs = 1000;
  o.blackboxDir = dir.path().string();
  PluginScope scope(o);
  auto driver = makeDriver(version);
  CommSpec comm;
  comm.commHash = 0xfeedface00c0ffeeull;
  comm.rank = 2;

  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < 3; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    c.nChannels = 4;
    b.collective(c);
  }
  CollSpec hung;
  hung.seqNumber = 3;
  hung.nChannels = 4;
  hung.nSteps = 3;
  hung.neverStop = {2};
  const int hungOp = b.collective(hung);
  const size_t lastProgress = lastEventOf(b.events, hungOp);

  auto keep = blackbox::Writer::create(dir.path().string(), "testhost");
  REQUIRE(keep.ok());
  Replay r(*driver, comm);
  Clocked run(scope, r);
  run.events(b.events, 0, lastProgress, 2 * kMs);  // 2 ms between events
  const uint64_t lastProgressNs = scope.clock.monoNs();
  run.events(b.events, lastProgress, b.events.size(), 2 * kMs);
  const uint64_t detected = run.idle(3000 * kMs);

  const auto faults = scope.sink.faults();
  REQUIRE(faults.size() == 1);
  const auto& f = faults[0];
  CHECK(f.faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG);
  CHECK(f.commHash == comm.commHash);
  CHECK(f.rank == comm.rank);
  CHECK(f.op.seqNumber == 3);
  CHECK(f.op.collIndex == 4);
  CHECK(std::string(f.op.func) == "AllReduce");
  CHECK(f.stuckChannels == (uint64_t{1} << 2));
  CAPTURE(f.text);
  CHECK(f.text.find("AllReduce seq 3") != std::string::npos);
  CHECK(f.text.find(version >= 3
                        ? "kernel channels started and not finished: 2"
                        : "channels with proxy operations not finished: 2") != std::string::npos);
  CHECK(f.text.find("RecvWait") != std::string::npos);
  // What the version does not give (v1-v3: rank count, exact channels) is left out.
  CHECK(f.text.find(version >= 4 ? "rank 2 of 4:" : "rank 2:") != std::string::npos);
  CHECK(f.text.find(version >= 4 ? "RING/SIMPLE, 4 channels)" : "RING/SIMPLE)") !=
        std::string::npos);
  // Within the timeout + 200 ms of the operation's last progress, not before the timeout.
  REQUIRE(detected != 0);
  CHECK(detected - lastProgressNs >= 1000 * kMs);
  CHECK(detected - lastProgressNs <= 1200 * kMs);

  // The blackbox has the fault record and the communicator's oldest operation as hung.
  auto snap = blackbox::readRegion(keep.value()->path());
  REQUIRE(snap.ok());
  REQUIRE(snap->faults.size() == 1);
  CHECK(snap->faults[0].faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG);
  CHECK(snap->faults[0].commId == comm.commHash);
  CHECK(snap->faults[0].seqNumber == 3);
  CHECK(snap->faults[0].stuckChannels == (uint64_t{1} << 2));
  CHECK(std::string(snap->faults[0].op) == "AllReduce");
  REQUIRE(snap->comms.size() == 1);
  const auto& c = snap->comms[0].comm;
  CHECK(c.collCompleted == 3);
  CHECK(c.collStarted == 4);
  CHECK(c.inFlight == 1);
  CHECK(c.faults == 1);
  CHECK(c.oldest.state == RESILIENT_BLACKBOX_OP_HUNG);
  CHECK(c.oldest.collIndex == 4);
  CHECK((c.oldest.channelsStarted & ~c.oldest.channelsDone) == (uint64_t{1} << 2));
  r.finalize();
}

TEST_CASE("a channel whose kernel never starts keeps the operation incomplete: one hang fault",
          "[profiler][hang]") {
  const int version = GENERATE(4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;  // timeout 1000 ms
  auto driver = makeDriver(version);
  CommSpec comm;
  StreamBuilder b(version, comm.commHash, comm.rank);
  CollSpec c;
  c.seqNumber = 9;
  c.nChannels = 4;
  c.neverStart = {3};
  b.collective(c);
  Replay r(*driver, comm);
  Clocked run(scope, r);
  run.events(b.events, 0, b.events.size(), kMs);
  const uint64_t last = scope.clock.monoNs();
  const uint64_t detected = run.idle(3000 * kMs);
  const auto faults = scope.sink.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG);
  CHECK(faults[0].op.seqNumber == 9);
  CHECK(faults[0].stuckChannels == 0);
  CAPTURE(faults[0].text);
  CHECK(faults[0].text.find("only 3 of 4 channels started") != std::string::npos);
  CHECK(detected - last <= 1200 * kMs);
}

TEST_CASE("operations enqueued with no proxy-thread event at all are a silent-progress fault",
          "[profiler][hang][silent]") {
  const int version = GENERATE(3, 4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;  // timeout 1000 ms
  auto driver = makeDriver(version);
  CommSpec comm;
  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < 2; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    b.collective(c);
  }
  const size_t healthy = b.events.size();
  for (int i = 2; i < 4; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    b.collective(c);
  }
  // Keep only the user-thread events of the last two: the progress thread is gone.
  std::vector<Event> events(b.events.begin(), b.events.begin() + static_cast<long>(healthy));
  for (size_t i = healthy; i < b.events.size(); ++i) {
    if (b.events[i].thread == 0) {
      events.push_back(b.events[i]);
    }
  }
  Replay r(*driver, comm);
  Clocked run(scope, r);
  run.events(events, 0, healthy, kMs);
  const uint64_t lastProxyEvent = scope.clock.monoNs();
  run.events(events, healthy, events.size(), kMs);
  const uint64_t enqueued = scope.clock.monoNs();
  const uint64_t detected = run.idle(5000 * kMs);

  const auto faults = scope.sink.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].faultClass == RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT);
  CHECK(faults[0].commHash == comm.commHash);
  CHECK(faults[0].op.seqNumber == 2);  // the oldest one waiting
  CAPTURE(faults[0].text);
  CHECK(faults[0].text.find("progress thread") != std::string::npos);
  REQUIRE(detected != 0);
  CHECK(detected - enqueued <= 1200 * kMs);
  CHECK(detected - lastProxyEvent >= 1000 * kMs);
}

TEST_CASE("a progress thread that dies in the middle of a running operation is one hang fault",
          "[profiler][hang][silent]") {
  const int version = GENERATE(3, 4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;
  auto driver = makeDriver(version);
  CommSpec comm;
  StreamBuilder b(version, comm.commHash, comm.rank);
  CollSpec c;
  c.nChannels = 2;
  c.nSteps = 4;
  const int op = b.collective(c);
  const size_t cut = lastEventOf(b.events, op) - 12;  // stops 12 events before the end
  Replay r(*driver, comm);
  Clocked run(scope, r);
  run.events(b.events, 0, cut, kMs);
  run.idle(4000 * kMs);
  const auto faults = scope.sink.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG);
  CAPTURE(faults[0].text);
  CHECK(faults[0].text.find("progress thread may have stopped") != std::string::npos);
}

TEST_CASE("slow but steady progress, idle communicators and a disabled timeout raise nothing",
          "[profiler][hang]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  SECTION("a proxy event every 600 ms with a 1000 ms timeout") {
    PluginScope scope;
    auto driver = makeDriver(version);
    CommSpec comm;
    StreamBuilder b(version, comm.commHash, comm.rank);
    CollSpec c;
    c.nChannels = 1;
    c.nSteps = 6;
    b.collective(c);
    Replay r(*driver, comm);
    Clocked run(scope, r);
    run.events(b.events, 0, b.events.size(), kMs, 600 * kMs);
    run.idle(5000 * kMs);
    CHECK(scope.sink.size() == 0);
    CHECK(static_cast<profiler::Context*>(r.context())->collCompleted.load() == 1);
  }
  SECTION("a communicator with nothing in flight for a minute") {
    PluginScope scope;
    auto driver = makeDriver(version);
    CommSpec comm;
    StreamBuilder b(version, comm.commHash, comm.rank);
    b.collective(CollSpec{});
    Replay r(*driver, comm);
    Clocked run(scope, r);
    run.events(b.events, 0, b.events.size(), kMs);
    run.idle(60000 * kMs);
    CHECK(scope.sink.size() == 0);
  }
  SECTION("NCCL_RESILIENT_COLL_TIMEOUT_MS=0") {
    ScopeOptions o;
    o.collTimeoutMs = 0;
    PluginScope scope(o);
    auto driver = makeDriver(version);
    CommSpec comm;
    StreamBuilder b(version, comm.commHash, comm.rank);
    CollSpec c;
    c.neverStop = {0};
    b.collective(c);
    Replay r(*driver, comm);
    Clocked run(scope, r);
    run.events(b.events, 0, b.events.size(), kMs);
    run.idle(10000 * kMs);
    CHECK(scope.sink.size() == 0);
  }
}

}  // namespace resilient::test
