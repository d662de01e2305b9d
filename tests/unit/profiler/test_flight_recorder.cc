// The flight recorder and the communicator table in the blackbox, read back
// with the reader consumers use: ring wrap-around, timings, identity and
// counters, v7's user tags and GPU-timed initial syncs; the region shared by
// two writers of one process.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi_driver.h"
#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "event_stream.h"
#include "nccl/profiler_common.h"
#include "plugin/profiler/context.h"
#include "plugin_scope.h"
#include "resilient/blackbox.h"
#include "tests/support/temp_dir.h"

namespace resilient::test {

TEST_CASE("the flight recorder keeps the last N operations, oldest first, after wrap-around",
          "[profiler][flight]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  o.flightOps = 8;
  PluginScope scope(o);
  auto driver = makeDriver(version);
  CommSpec comm;
  comm.name = "dp-group";
  comm.nranks = 8;
  comm.rank = 5;
  StreamBuilder b(version, comm.commHash, comm.rank);
  for (int i = 0; i < 20; ++i) {
    CollSpec c;
    c.seqNumber = 100 + static_cast<uint64_t>(i);
    c.count = 1000 + static_cast<size_t>(i);
    c.nChannels = 2;
    c.userTag = 0x7a00 + static_cast<uint64_t>(i);  // v7 only
    b.collective(c);
  }
  P2pSpec p;
  p.peer = 3;
  p.userTag = 0xfeed;
  b.p2p(p);

  Replay r(*driver, comm);
  REQUIRE(r.context() != nullptr);
  for (size_t i = 0; i < b.events.size(); ++i) {
    r.run(b.events, i, i + 1, false);
    scope.clock.advance(1000);  // 1 us per event: the timings must be ordered
  }
  scope.scan();  // publishes the communicator table

  const std::string path = blackbox::regionPath(dir.path().string(), getpid());
  auto snap = blackbox::readRegion(path);
  REQUIRE(snap.ok());
  CHECK(snap->header.version == RESILIENT_BLACKBOX_VERSION);
  CHECK(snap->header.flightOps == 8);
  CHECK(snap->processAlive);
  REQUIRE(snap->comms.size() == 1);
  const auto& view = snap->comms[0];
  const auto& c = view.comm;
  CHECK(c.state == RESILIENT_BLACKBOX_COMM_ACTIVE);
  CHECK(c.commId == comm.commHash);
  CHECK(c.rank == comm.rank);
  CHECK(c.abiVersion == static_cast<uint32_t>(version));
  if (version >= 4) {
    CHECK(c.nranks == 8);
    CHECK(std::string(c.name) == "dp-group");
  }
  CHECK(c.collEnqueued == 20);
  CHECK(c.collCompleted == 20);
  CHECK(c.p2pCompleted == 1);
  CHECK(c.completedByFunc[4] == 120);  // AllReduce: last seqNumber 119, + 1
  CHECK(c.flightWritten == 21);
  CHECK(c.inFlight == 0);
  CHECK(c.oldest.opIndex == 0);

  // 21 operations, ring of 8: operations 14..21, in order.
  REQUIRE(view.flight.size() == 8);
  for (size_t k = 0; k < view.flight.size(); ++k) {
    const auto& op = view.flight[k];
    CAPTURE(k);
    CHECK(op.opIndex == 14 + k);
    CHECK(op.commId == comm.commHash);
    CHECK(op.state == RESILIENT_BLACKBOX_OP_COMPLETED);
    CHECK(op.enqueueMonoNs < op.endMonoNs);
    CHECK(op.startMonoNs >= op.enqueueMonoNs);
    CHECK(op.endMonoNs >= op.startMonoNs);
    if (k < 7) {
      CHECK(op.kind == RESILIENT_BLACKBOX_OP_COLL);
      CHECK(op.collIndex == 14 + k);
      CHECK(op.seqNumber == 113 + k);
      CHECK(std::string(op.func) == "AllReduce");
      CHECK(std::string(op.datatype) == "ncclFloat32");
      CHECK(std::string(op.algo) == "RING");
      CHECK(std::string(op.proto) == "SIMPLE");
      CHECK(op.count == 1013 + k);
      CHECK(op.bytes == 4 * (1013 + k));
      CHECK(op.channelsStarted == 3);
      CHECK(op.channelsDone == 3);
      CHECK(op.proxyOps == 4);
      if (version >= 4) {
        CHECK(op.nChannels == 2);
        CHECK(op.gpuStartNs != 0);
        CHECK(op.gpuStopNs > op.gpuStartNs);
      }
      // v7: the longer of the two channels' initial syncs (2000, 2100 ns).
      CHECK(op.syncWaitNs == (version >= 7 ? 2100 : 0));
      CHECK(op.userTag == (version >= 7 ? 0x7a00 + 13 + k : 0));
      CHECK(op.opFlags == 0);
    } else {
      CHECK(op.kind == RESILIENT_BLACKBOX_OP_P2P);
      CHECK(op.collIndex == 0);
      CHECK(std::string(op.func) == "Send");
      CHECK(op.rootOrPeer == 3);
      CHECK(op.userTag == (version >= 7 ? 0xfeed : 0));
    }
  }
}

TEST_CASE(
    "profiler v7: each collective keeps its user tag and its longest GPU-timed initial sync; a "
    "symmetric kernel is flagged",
    "[profiler][flight][v7]") {
  TempDir dir;
  ScopeOptions o;
  o.blackboxDir = dir.path().string();
  PluginScope scope(o);
  auto driver = makeDriver(7);
  CommSpec comm;
  StreamBuilder b(7, comm.commHash, comm.rank);
  CollSpec sym;  // waited 9 us on its slowest channel for the last rank
  sym.nChannels = 3;
  sym.symmetric = true;
  sym.userTag = 0x1234;
  sym.syncNs = {5000, 9000, 7000};
  b.collective(sym);
  CollSpec noWait;  // the last rank: no measurable wait on any channel (no initial_sync phase)
  noWait.seqNumber = 1;
  noWait.symmetric = true;
  noWait.syncNs = {0, 0};
  b.collective(noWait);
  CollSpec classic;  // one channel without an initial_sync phase, one with
  classic.seqNumber = 2;
  classic.syncNs = {0, 4000};
  b.collective(classic);
  Replay r(*driver, comm);
  REQUIRE(r.context() != nullptr);
  CHECK((r.mask() & ncclProfileKernelPhase) != 0);
  r.run(b.events, false);
  CHECK(r.allCallsSucceeded());
  CHECK(r.nullHandles() == 0);

  auto snap = blackbox::readRegion(blackbox::regionPath(dir.path().string(), getpid()));
  REQUIRE(snap.ok());
  REQUIRE(snap->comms.size() == 1);
  const auto& flight = snap->comms[0].flight;
  REQUIRE(flight.size() == 3);
  CHECK(flight[0].state == RESILIENT_BLACKBOX_OP_COMPLETED);
  CHECK(flight[0].syncWaitNs == 9000);
  CHECK(flight[0].userTag == 0x1234);
  CHECK(flight[0].opFlags == RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC);
  CHECK(flight[1].syncWaitNs == 1);  // measured, no wait: 0 would mean unknown
  CHECK(flight[1].userTag == 0);
  CHECK(flight[1].opFlags == RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC);
  CHECK(flight[2].syncWaitNs == 4000);
  CHECK(flight[2].opFlags == 0);
  // The phases held no slot: every operation and phase slot is free again.
  auto* ctx = static_cast<profiler::Context*>(r.context());
  CHECK(ctx->pool.countFree() == ctx->capacity);
  CHECK(ctx->phasePool.countFree() == profiler::kPhaseSlots);
}

TEST_CASE("blackbox v2: writers of one process share the region; the last one removes it",
          "[profiler][blackbox]") {
  TempDir dir;
  blackbox::Layout layout;
  layout.flightOps = 16;
  auto a = blackbox::Writer::create(dir.path().string(), "host-a", layout);
  REQUIRE(a.ok());
  const std::string path = a.value()->path();
  {
    layout.flightOps = 999;  // an attached writer keeps the region's layout
    auto b = blackbox::Writer::create(dir.path().string(), "host-b", layout);
    REQUIRE(b.ok());
    CHECK(b.value()->path() == path);
    CHECK(b.value()->flightOps() == 16);
    // What one writes, the other's readers see.
    resilient_blackbox_fault f{};
    f.faultClass = RESILIENT_BLACKBOX_FAULT_COLL_HUNG;
    blackbox::copyText(f.text, "from b");
    b.value()->recordFault(f);
    const int slot = a.value()->claimComm();
    CHECK(slot >= 0);
    CHECK(b.value()->claimComm() != slot);
    auto snap = blackbox::readRegion(path);
    REQUIRE(snap.ok());
    CHECK(snap->header.attachCount == 2);
    CHECK(std::string(snap->header.host) == "host-a");
    REQUIRE(snap->faults.size() == 1);
    CHECK(std::string(snap->faults[0].text) == "from b");
  }
  CHECK(std::filesystem::exists(path));  // a is still attached
  a.value().reset();
  CHECK(!std::filesystem::exists(path));
}

TEST_CASE("blackbox v2: a region left by an earlier process with our pid is replaced",
          "[profiler][blackbox]") {
  TempDir dir;
  blackbox::Layout layout;
  layout.flightOps = 8;
  std::string path;
  {
    auto a = blackbox::Writer::create(dir.path().string(), "h", layout);
    REQUIRE(a.ok());
    path = a.value()->path();
    std::filesystem::copy_file(path, path + ".stale");
    a.value()->recordFault(resilient_blackbox_fault{});
  }
  // A crash leaves the file behind: make it an earlier process's (same pid,
  // another start time).
  {
    const int fd = ::open((path + ".stale").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    const uint64_t otherStart = blackbox::processStartTicks(getpid()) + 12345;
    REQUIRE(::pwrite(fd, &otherStart, sizeof otherStart,
                     offsetof(resilient_blackbox_header, processStartTicks)) == 8);
    ::close(fd);
  }
  std::filesystem::rename(path + ".stale", path);
  {
    auto before = blackbox::readRegion(path);
    REQUIRE(before.ok());
    CHECK(!before->processAlive);  // the pid lives, but it is not the writer
  }
  auto b = blackbox::Writer::create(dir.path().string(), "h", layout);
  REQUIRE(b.ok());
  auto snap = blackbox::readRegion(path);
  REQUIRE(snap.ok());
  CHECK(snap->header.attachCount == 1);
  CHECK(snap->header.faultCount == 0);
  CHECK(snap->header.processStartTicks == blackbox::processStartTicks(getpid()));
}

TEST_CASE("the communicator table reuses finalized slots only when no free slot is left",
          "[profiler][blackbox]") {
  TempDir dir;
  auto w = blackbox::Writer::create(dir.path().string(), "h", blackbox::Layout{});
  REQUIRE(w.ok());
  auto& writer = *w.value();
  std::vector<int> slots;
  for (int i = 0; i < RESILIENT_BLACKBOX_COMMS; ++i) {
    const int s = writer.claimComm();
    REQUIRE(s >= 0);
    slots.push_back(s);
    resilient_blackbox_comm c{};
    c.state = RESILIENT_BLACKBOX_COMM_ACTIVE;
    c.commId = static_cast<uint64_t>(i) + 1;
    c.updatedMonoNs = 1000 + static_cast<uint64_t>(i);
    writer.writeComm(s, c);
  }
  CHECK(writer.claimComm() == -1);
  // Finalize two; the one finalized with the older timestamp is reused first.
  resilient_blackbox_comm done{};
  done.state = RESILIENT_BLACKBOX_COMM_FINALIZED;
  done.updatedMonoNs = 50;
  writer.writeComm(slots[10], done);
  done.updatedMonoNs = 40;
  writer.writeComm(slots[20], done);
  CHECK(writer.claimComm() == slots[20]);
  CHECK(writer.claimComm() == slots[10]);
  CHECK(writer.claimComm() == -1);
}

}  // namespace resilient::test
