// Replays of NCCL 2.28 event streams (v7: with 2.31's kernel phases) through
// every ABI version's exported struct (ncclProfiler_v1..v7): tracking,
// completion, slot reuse, threads, NULL handles and an abort in the middle
// of a stream.
#include <unistd.h>

#include <set>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi_driver.h"
#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "event_stream.h"
#include "nccl/profiler_common.h"
#include "plugin/profiler/context.h"
#include "plugin/profiler/names.h"
#include "plugin_scope.h"
#include "resilient/blackbox.h"
#include "tests/support/temp_dir.h"

namespace resilient::test {
namespace {

using profiler::Context;

int expectedMask(int version) {
  int m = ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep;
  m |= version >= 3 ? ncclProfileKernelCh : 0;
  return version >= 7 ? m | ncclProfileKernelPhase : m;
}

// 40 collectives (1-4 channels, some without network work, some with proxy
// control events) and 8 p2p operations.
StreamBuilder mixedStream(int version, const CommSpec& comm, int collectives = 40) {
  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < collectives; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    c.func = i % 3 == 0 ? "AllGather" : "AllReduce";
    c.count = 1024 + static_cast<size_t>(i);
    c.nChannels = static_cast<uint8_t>(1 + i % 4);
    c.nSteps = 1 + i % 3;
    c.network = i % 5 != 0;
    c.proxyCtrl = i % 7 == 0;
    b.collective(c);
  }
  for (int i = 0; i < 8; ++i) {
    P2pSpec p;
    p.func = i % 2 == 0 ? "Send" : "Recv";
    p.peer = 1 + i % 3;
    b.p2p(p);
  }
  return b;
}

Context* contextOf(const Replay& r) {
  return static_cast<Context*>(r.context());
}

// With v1, v2 an operation without network work has no child event at all;
// the detector retires it a while after its enqueue.
void retireChildless(PluginScope& scope) {
  scope.scan();
  scope.clock.advanceMs(1100);
  scope.scan();
}

// Communicators that each replay a mixed stream, split over a user and a
// progress thread (two threads per communicator).
class BusyComms {
 public:
  BusyComms(AbiDriver& driver, int count, uint64_t firstHash, int collectives)
      : collectives_(collectives) {
    for (int c = 0; c < count; ++c) {
      CommSpec comm;
      comm.commHash = firstHash + static_cast<uint64_t>(c);
      comm.rank = c;
      comms_.push_back(comm);
      streams_.push_back(mixedStream(driver.version(), comm, collectives));
      replays_.push_back(std::make_unique<Replay>(driver, comm));
      REQUIRE(replays_.back()->context() != nullptr);
    }
  }
  // Adds each communicator's user thread (which starts its progress thread).
  void start(std::vector<std::thread>& threads) {
    for (size_t c = 0; c < replays_.size(); ++c) {
      threads.emplace_back([this, c] { replays_[c]->run(streams_[c].events, true); });
    }
  }
  // After the threads joined: every operation completed, every slot free.
  void checkCompleted() const {
    for (size_t c = 0; c < replays_.size(); ++c) {
      CAPTURE(c);
      Context* ctx = contextOf(*replays_[c]);
      CHECK(replays_[c]->allCallsSucceeded());
      CHECK(ctx->commHash.load() == comms_[c].commHash);
      CHECK(ctx->collCompleted.load() == static_cast<uint64_t>(collectives_));
      CHECK(ctx->p2pCompleted.load() == 8);
      CHECK(ctx->pool.countFree() == ctx->capacity);
      CHECK(ctx->phasePool.countFree() == profiler::kPhaseSlots);
    }
  }
  void finalize() { replays_.clear(); }

 private:
  int collectives_;
  std::vector<CommSpec> comms_;
  std::vector<StreamBuilder> streams_;
  std::vector<std::unique_ptr<Replay>> replays_;
};

}  // namespace

TEST_CASE("replays in NCCL 2.28's order complete every operation and free every slot",
          "[profiler][replay]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  const bool threaded = GENERATE(false, true);
  CAPTURE(version, threaded);
  PluginScope scope;
  auto driver = makeDriver(version);
  CommSpec comm;
  const StreamBuilder b = mixedStream(version, comm);
  Replay r(*driver, comm);
  REQUIRE(r.initResult() == ncclSuccess);
  REQUIRE(r.context() != nullptr);
  CHECK(r.mask() == expectedMask(version));

  r.run(b.events, threaded);
  CHECK(r.allCallsSucceeded());
  CHECK(r.nullHandles() == 0);
  Context* ctx = contextOf(r);
  if (version <= 2) {
    retireChildless(scope);
  }
  CHECK(ctx->commHash.load() == comm.commHash);  // v1-v3 learn it from the descriptors
  CHECK(ctx->rank.load() == comm.rank);
  CHECK(ctx->collCounter.load() == 40);
  CHECK(ctx->collCompleted.load() == 40);
  CHECK(ctx->p2pCounter.load() == 8);
  CHECK(ctx->p2pCompleted.load() == 8);
  CHECK(ctx->completedByFunc[profiler::kFuncAllReduce].load() == 39);  // last seq 38, + 1
  CHECK(ctx->completedByFunc[2].load() == 40);                         // AllGather: seq 39
  CHECK(ctx->flightWritten.load() == 48);
  CHECK(ctx->dropped.load() == 0);
  CHECK(ctx->pool.countFree() == ctx->capacity);  // every slot went back
  CHECK(ctx->phasePool.countFree() == profiler::kPhaseSlots);
  for (uint32_t i = 0; i < ctx->capacity; ++i) {
    CHECK(ctx->slots[i].generation.load() == 0);
  }
  scope.scan();
  CHECK(scope.sink.size() == 0);
  r.finalize();
  CHECK(PluginScope::plugin() == nullptr);  // the last finalize destroyed the plugin
}

TEST_CASE("several communicators replayed on several threads at once", "[profiler][replay]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;
  auto driver = makeDriver(version);
  BusyComms comms(*driver, 3, 0x1000, 60);
  std::vector<std::thread> threads;
  comms.start(threads);  // 6 threads
  for (auto& t : threads) {
    t.join();
  }
  if (version <= 2) {
    retireChildless(scope);
  }
  comms.checkCompleted();
  CHECK(scope.sink.size() == 0);
  comms.finalize();
  CHECK(PluginScope::plugin() == nullptr);
}

TEST_CASE("a slot pool smaller than the operations in flight hands out NULL handles safely",
          "[profiler][replay][null]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  ScopeOptions o;
  o.opsPerContext = 16;
  PluginScope scope(o);
  auto driver = makeDriver(version);
  CommSpec comm;
  // 40 collectives enqueued before the progress thread runs any of them: 24
  // get no slot, so NCCL passes NULL parents to their children.
  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < 40; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    c.nChannels = 2;
    b.collective(c);
  }
  std::vector<Event> users;
  std::vector<Event> progress;
  for (const auto& e : b.events) {
    (e.thread == 0 ? users : progress).push_back(e);
  }
  std::vector<Event> ordered = users;
  ordered.insert(ordered.end(), progress.begin(), progress.end());
  Replay r(*driver, comm);
  r.run(ordered, false);
  CHECK(r.allCallsSucceeded());
  CHECK(r.nullHandles() > 0);
  Context* ctx = contextOf(r);
  CHECK(ctx->dropped.load() == 24);
  CHECK(ctx->collCompleted.load() == 16);
  CHECK(ctx->pool.countFree() == ctx->capacity);

  // The slots are free again: the next operations are tracked.
  StreamBuilder more(version, comm.commHash, comm.rank);
  for (int i = 40; i < 45; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    more.collective(c);
  }
  Replay r2(*driver, comm);  // a second communicator of the same plugin
  r2.run(more.events, false);
  CHECK(contextOf(r2)->collCompleted.load() == 5);
}

TEST_CASE("every hook tolerates NULL and foreign handles, NULL arguments and NULL contexts",
          "[profiler][replay][null]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;
  auto driver = makeDriver(version);
  CommSpec comm;
  Replay r(*driver, comm);
  REQUIRE(r.context() != nullptr);

  void* h = opaque(1);
  Event coll;
  coll.type = EventType::kColl;
  coll.nChannels = 2;
  // NULL context (a communicator whose init failed): NULL handle, success.
  CHECK(driver->start(nullptr, &h, coll, nullptr) == ncclSuccess);
  CHECK(h == nullptr);
  // NULL and garbage handles, with and without state arguments.
  void* const junk[] = {nullptr, opaque(0xdeadbeef), opaque(~uintptr_t{0}), &h};
  for (void* j : junk) {
    CHECK(driver->stop(j) == ncclSuccess);
    for (int state : {0, 9, 10, 12, 19, 20, 21, 22, 23, 24, 25, 31}) {  // 25, 31: unknown states
      CHECK(driver->record(j, state, 1, true) == ncclSuccess);
      CHECK(driver->record(j, state, 1, false) == ncclSuccess);
    }
    Event child;
    child.type = version >= 3 ? EventType::kKernelCh : EventType::kProxyOp;
    CHECK(driver->start(r.context(), &h, child, j) == ncclSuccess);
    CHECK(h == nullptr);
  }
  // A PXN proxy op (another process's pid) whose parent is not ours.
  Event pxn;
  pxn.type = EventType::kProxyOp;
  pxn.pid = getpid() + 1;
  CHECK(driver->start(r.context(), &h, pxn, opaque(0x1234)) == ncclSuccess);
  CHECK(driver->stop(h) == ncclSuccess);
  // Channel ids beyond NCCL's 64.
  void* op = nullptr;
  REQUIRE(driver->start(r.context(), &op, coll, nullptr) == ncclSuccess);
  REQUIRE(op != nullptr);
  Event wide;
  wide.type = version >= 3 ? EventType::kKernelCh : EventType::kProxyOp;
  wide.channel = 200;
  CHECK(driver->start(r.context(), &h, wide, op) == ncclSuccess);
  CHECK(driver->stop(h) == ncclSuccess);
  CHECK(driver->stop(op) == ncclSuccess);
  // Finalize with a NULL context is harmless too.
  CHECK(driver->finalize(nullptr) == ncclSuccess);
  CHECK(contextOf(r)->collCounter.load() == 1);
}

TEST_CASE(
    "v7 kernel phases: a stop state after the stop and a second stop change nothing; a parent "
    "that is no kernel channel, or no free phase slot, gives NULL",
    "[profiler][replay][null][v7]") {
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  PluginScope scope(o);
  auto driver = makeDriver(7);
  CommSpec comm;
  Replay r(*driver, comm);
  REQUIRE(r.context() != nullptr);
  Context* ctx = contextOf(r);
  Event coll;
  coll.type = EventType::kColl;
  coll.nChannels = 1;
  void* op = nullptr;
  REQUIRE(driver->start(r.context(), &op, coll, nullptr) == ncclSuccess);
  REQUIRE(op != nullptr);
  Event kernel;
  kernel.type = EventType::kKernelCh;
  kernel.pTimer = 100;
  void* ch = nullptr;
  REQUIRE(driver->start(r.context(), &ch, kernel, op) == ncclSuccess);
  REQUIRE(ch != nullptr);

  Event sync;
  sync.type = EventType::kKernelPhase;
  sync.phaseId = 0;
  sync.pTimer = 100;
  void* phase = nullptr;
  REQUIRE(driver->start(r.context(), &phase, sync, ch) == ncclSuccess);
  REQUIRE(phase != nullptr);
  CHECK(driver->record(phase, ncclProfilerKernelPhaseStop, 600, false) == ncclSuccess);
  CHECK(driver->stop(phase) == ncclSuccess);
  // Late and repeated calls on the stopped phase: ignored.
  CHECK(driver->record(phase, ncclProfilerKernelPhaseStop, 900000, false) == ncclSuccess);
  CHECK(driver->stop(phase) == ncclSuccess);
  CHECK(ctx->phasePool.countFree() == profiler::kPhaseSlots);

  // Parents that are not a kernel channel of ours.
  const uint64_t droppedBefore = ctx->dropped.load();
  void* h = opaque(1);
  CHECK(driver->start(r.context(), &h, sync, op) == ncclSuccess);  // the operation itself
  CHECK(h == nullptr);
  CHECK(driver->start(r.context(), &h, sync, nullptr) == ncclSuccess);  // untracked parent
  CHECK(h == nullptr);
  CHECK(ctx->dropped.load() == droppedBefore + 1);

  // Every phase slot open at once: each phase its own slot, then NULL.
  Event compute = sync;
  compute.phaseId = 1;
  compute.pTimer = 700;
  std::set<void*> open;
  for (uint32_t i = 0; i < profiler::kPhaseSlots; ++i) {
    void* p = nullptr;
    CHECK(driver->start(r.context(), &p, compute, ch) == ncclSuccess);
    CHECK(p != nullptr);
    open.insert(p);
  }
  CHECK(open.size() == profiler::kPhaseSlots);
  CHECK(driver->start(r.context(), &h, compute, ch) == ncclSuccess);
  CHECK(h == nullptr);
  CHECK(ctx->dropped.load() == droppedBefore + 2);
  for (void* p : open) {
    CHECK(driver->stop(p) == ncclSuccess);
  }
  CHECK(ctx->phasePool.countFree() == profiler::kPhaseSlots);

  CHECK(driver->record(ch, ncclProfilerKernelChStop, 5000, false) == ncclSuccess);
  CHECK(driver->stop(ch) == ncclSuccess);
  CHECK(driver->stop(op) == ncclSuccess);
  CHECK(ctx->collCompleted.load() == 1);
  CHECK(ctx->pool.countFree() == ctx->capacity);
  auto snap = blackbox::readRegion(blackbox::regionPath(dir.path().string(), getpid()));
  REQUIRE(snap.ok());
  REQUIRE(snap->comms.size() == 1);
  REQUIRE(snap->comms[0].flight.size() == 1);
  CHECK(snap->comms[0].flight[0].syncWaitNs == 500);  // 600 - 100; the late 900000 ignored
}

TEST_CASE(
    "an abort in the middle of a stream abandons what was in flight; late events are "
    "ignored",
    "[profiler][replay][abort]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  PluginScope scope(o);
  auto driver = makeDriver(version);
  CommSpec comm;
  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < 10; ++i) {
    CollSpec c;
    c.seqNumber = static_cast<uint64_t>(i);
    c.nChannels = 4;
    b.collective(c);
  }
  // Cut the stream in the middle of the 6th collective's proxy events.
  size_t cut = 0;
  int colls = 0;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const auto& e = b.events[i];
    if (e.kind == EventKind::kStart && e.type == EventType::kColl && ++colls == 6) {
      cut = i + 25;
      break;
    }
  }
  REQUIRE(cut > 0);
  {
    // A reader holds the region open so that it outlives the plugin.
    auto keep = blackbox::Writer::create(dir.path().string(), "testhost");
    REQUIRE(keep.ok());
    auto r = std::make_unique<Replay>(*driver, comm);
    r->run(b.events, 0, cut, false);
    Context* ctx = contextOf(*r);
    CHECK(ctx->collCompleted.load() == 5);
    r->finalize();  // ncclCommAbort: finalize with operations in flight
    CHECK(PluginScope::plugin() == nullptr);
    // NCCL would not send more events for this communicator; even if late
    // ones come (stale handles), nothing happens.
    r->run(b.events, cut, b.events.size(), false);
    CHECK(r->allCallsSucceeded());

    auto snap = blackbox::readRegion(keep.value()->path());
    REQUIRE(snap.ok());
    REQUIRE(snap->comms.size() == 1);
    const auto& view = snap->comms[0];
    CHECK(view.comm.state == RESILIENT_BLACKBOX_COMM_FINALIZED);
    CHECK(view.comm.collCompleted == 5);
    REQUIRE(view.flight.size() == 6);
    CHECK(view.flight[4].state == RESILIENT_BLACKBOX_OP_COMPLETED);
    CHECK(view.flight[5].state == RESILIENT_BLACKBOX_OP_ABANDONED);
    CHECK(view.flight[5].collIndex == 6);
  }
  // A new communicator after the abort works normally.
  StreamBuilder again(version, comm.commHash + 1, comm.rank);
  CollSpec c;
  c.nChannels = 2;
  again.collective(c);
  CommSpec next = comm;
  next.commHash = comm.commHash + 1;
  Replay r2(*driver, next);
  r2.run(again.events, false);
  CHECK(contextOf(r2)->collCompleted.load() == 1);
}

TEST_CASE("one communicator aborted and another created while others replay on their threads",
          "[profiler][replay][abort]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  PluginScope scope;
  auto driver = makeDriver(version);
  BusyComms busy(*driver, 2, 0x2000, 120);
  // A third communicator is aborted in the middle of its stream, and a fourth
  // created and run, on two more threads, while the busy ones run.
  CommSpec aborted;
  aborted.commHash = 0x3000;
  const StreamBuilder cut = mixedStream(version, aborted, 20);
  CommSpec fresh;
  fresh.commHash = 0x4000;
  const StreamBuilder next = mixedStream(version, fresh, 20);
  Replay victim(*driver, aborted);
  REQUIRE(victim.context() != nullptr);
  std::unique_ptr<Replay> created;
  std::vector<std::thread> threads;
  busy.start(threads);
  threads.emplace_back([&] {
    victim.run(cut.events, 0, cut.events.size() / 2, true);
    victim.finalize();  // ncclCommAbort with operations in flight
    created = std::make_unique<Replay>(*driver, fresh);
    created->run(next.events, true);
  });
  for (auto& t : threads) {
    t.join();
  }
  CHECK(victim.allCallsSucceeded());
  REQUIRE(created->context() != nullptr);
  if (version <= 2) {
    retireChildless(scope);
  }
  busy.checkCompleted();
  Context* made = contextOf(*created);
  CHECK(created->allCallsSucceeded());
  CHECK(made->commHash.load() == fresh.commHash);
  CHECK(made->collCompleted.load() == 20);
  CHECK(made->pool.countFree() == made->capacity);
  CHECK(scope.sink.size() == 0);
  busy.finalize();
  created.reset();
  CHECK(PluginScope::plugin() == nullptr);
}

}  // namespace resilient::test
