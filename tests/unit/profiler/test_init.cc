// An init that cannot (or must not) track its communicator, through every
// ABI version: init still returns ncclSuccess (NCCL only logs a failed init
// and goes on, docs/reference/nccl-abi.md §2.1), the context is NULL, events for it get NULL
// handles, finalize is harmless, nothing is left acquired, and the other
// communicators and later inits work.
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "abi_driver.h"
#include "event_stream.h"
#include "nccl/profiler_common.h"
#include "plugin/profiler/context.h"
#include "plugin/profiler/handle.h"
#include "plugin_scope.h"

namespace resilient::test {
namespace {

// Replays one collective on `r`; the operation must not be tracked.
void replayUntracked(AbiDriver& driver, Replay& r, const CommSpec& comm) {
  StreamBuilder b(driver.version(), comm.commHash, comm.rank);
  b.collective(CollSpec{});
  r.run(b.events, false);
  CHECK(r.allCallsSucceeded());
  CHECK(r.nullHandles() == static_cast<size_t>(b.ids()));  // every start got NULL
}

// A communicator of a fresh, working plugin tracks its operations.
void checkFreshInitWorks(int version) {
  PluginScope scope;
  auto driver = makeDriver(version);
  CommSpec comm;
  Replay r(*driver, comm);
  REQUIRE(r.context() != nullptr);
  StreamBuilder b(version, comm.commHash, comm.rank);
  b.collective(CollSpec{});
  r.run(b.events, false);
  CHECK(static_cast<profiler::Context*>(r.context())->collCompleted.load() == 1);
}

}  // namespace

TEST_CASE("an init that cannot track its communicator disables the plugin for it, not NCCL",
          "[profiler][replay][init]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  CAPTURE(version);
  ScopeOptions o;
  o.opsPerContext = 16;
  PluginScope scope(o);
  auto driver = makeDriver(version);
  std::vector<std::unique_ptr<Replay>> comms;
  for (uint32_t i = 0; i < profiler::kMaxContexts; ++i) {
    CommSpec c;
    c.commHash = 0x5000 + i;
    comms.push_back(std::make_unique<Replay>(*driver, c));
    REQUIRE(comms.back()->context() != nullptr);
  }
  // One communicator too many: init succeeds (NCCL goes on), with no context.
  // The mask the others set stays, so NCCL sends its events with context NULL.
  CommSpec extra;
  extra.commHash = 0x9999;
  Replay r(*driver, extra);
  CHECK(r.initResult() == ncclSuccess);
  CHECK(r.context() == nullptr);
  replayUntracked(*driver, r, extra);
  r.finalize();
  CHECK(r.allCallsSucceeded());
  CHECK(PluginScope::plugin() != nullptr);  // the others keep it
  // The others still work, and a freed slot is usable again.
  comms.pop_back();
  CommSpec again;
  again.commHash = 0x7777;
  Replay r2(*driver, again);
  REQUIRE(r2.context() != nullptr);
  StreamBuilder b2(version, again.commHash, again.rank);
  b2.collective(CollSpec{});
  r2.run(b2.events, false);
  CHECK(static_cast<profiler::Context*>(r2.context())->collCompleted.load() == 1);
  r2.finalize();
  comms.clear();
  CHECK(PluginScope::plugin() == nullptr);  // the failed init held no reference
}

TEST_CASE("an init with unusable options, or with the profiler off, succeeds and holds nothing",
          "[profiler][replay][init]") {
  const int version = GENERATE(1, 2, 3, 4, 5, 6, 7);
  const bool off = GENERATE(false, true);  // NCCL_RESILIENT_PROFILER=0
  CAPTURE(version, off);
  {
    ScopeOptions o;
    if (off) {
      o.enabled = false;
    } else {
      o.opsPerContext = 0;  // outside [1, kMaxOpsPerContext]
    }
    PluginScope scope(o);
    auto driver = makeDriver(version);
    CommSpec comm;
    comm.maskBefore = ncclProfileColl;  // set by another communicator
    Replay r(*driver, comm);
    CHECK(r.initResult() == ncclSuccess);
    CHECK(r.context() == nullptr);
    // Off: no events for any communicator. Unusable options: this one is not
    // tracked, the others' mask stays.
    CHECK(r.mask() == (off ? 0 : ncclProfileColl));
    CHECK(PluginScope::plugin() == nullptr);
    replayUntracked(*driver, r, comm);
    r.finalize();
    CHECK(r.allCallsSucceeded());
    CHECK(PluginScope::plugin() == nullptr);
  }
  checkFreshInitWorks(version);
}

}  // namespace resilient::test
