// The host engine as NCCL 2.28.9 calls a net plugin (the call contract of
// docs/net-plugin.md, "Conformance"): whole jobs of ranks-as-threads over the
// fake plugin (tests/support/fake_net), loaded through the external
// transport, with one knob per point of the contract. Where NCCL tolerates
// what the plugin does, so does the engine: every byte must arrive and be
// checked, with no fault.
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "hostengine/engine.h"
#include "tests/support/mock_logger.h"
#include "tests/unit/hostengine/rank_threads.h"
#include "tests/unit/transport/external/fake_plugin.h"

namespace he = resilient::hostengine;
using resilient::test::FakeModule;
using resilient::test::loadFake;
using resilient::test::requireClean;
using resilient::test::runRanks;
using resilient::transport::Transport;

namespace {

const std::vector<size_t> kSizes{4, 4099, 300001};

// Runs every pattern on 3 ranks over the fake of `version` with `knobs` set;
// returns the fake's counters.
FakeNetStats runOverFake(int version, const std::vector<std::pair<const char*, long>>& knobs) {
  FakeModule fake(version);
  for (const auto& [knob, value] : knobs) {
    fake.set(knob, value);
  }
  auto transport = loadFake(version);
  for (const he::Pattern pattern :
       {he::Pattern::kSendRecv, he::Pattern::kAllReduce, he::Pattern::kAllToAll}) {
    CAPTURE(static_cast<int>(pattern));
    he::EngineOptions options;
    options.chunkBytes = 64 << 10;
    options.timeoutMs = 20000;
    requireClean(runRanks(
        3, pattern, kSizes, [&](int) -> Transport& { return *transport; }, options));
  }
  return fake.stats();
}

}  // namespace

TEST_CASE("connection setup runs on a service thread, never on the data path's thread",
          "[hostengine][conformance]") {
  // NCCL calls listen/connect/accept/regMr from its proxy service thread and
  // isend/irecv/test from the progress thread: a plugin may not rely on them
  // sharing one.
  for (int version : {6, 11}) {
    CAPTURE(version);
    const FakeNetStats stats = runOverFake(version, {});
    CHECK(stats.isendCalls > 0);
    CHECK(stats.dataCallsOnSetupThread == 0);
  }
}

TEST_CASE("test() that never writes sizes is tolerated, as NCCL does, with one WARN",
          "[hostengine][conformance]") {
  // Issue 23: a real ABI-v6 plugin writes no sizes, on send or receive.
  resilient::test::CapturingLogger logger(resilient::log::Level::kWarn);
  for (int version : {6, 11}) {
    CAPTURE(version);
    const FakeNetStats stats = runOverFake(version, {{"reportSizes", 0}});
    CHECK(stats.recvsCompleted > 0);
  }
  CHECK(logger.count(NCCL_LOG_WARN, "test() did not report the sizes of completed receives") >= 1);
}

TEST_CASE("the size test() writes for a send is not used", "[hostengine][conformance]") {
  // NCCL hands test() one int for a send and never reads it.
  runOverFake(11, {{"garbageSendSize", 1}});
}

TEST_CASE("a receive size test() reports other than the posted one is counted wrong",
          "[hostengine][conformance]") {
  // Stricter than NCCL (which does not check it for host memory): every rank
  // posts the sizes the senders send, so another size is a lost or mixed-up
  // message. It counts as wrong data, not as a fault.
  FakeModule fake(11);
  fake.set("wrongRecvSize", 1);
  auto transport = loadFake(11);
  const auto runs = runRanks(2, he::Pattern::kSendRecv, {4099},
                             [&](int) -> Transport& { return *transport; });
  for (const auto& run : runs) {
    REQUIRE_FALSE(run.setupFault);
    REQUIRE(run.results.size() == 2);
    for (const auto& result : run.results) {
      CHECK_FALSE(result.fault);
      CHECK(result.errors > 0);
    }
  }
}

TEST_CASE("ncclInProgress from any call is success, as NCCL's checks take it",
          "[hostengine][conformance]") {
  for (int version : {6, 11}) {
    CAPTURE(version);
    const FakeNetStats stats = runOverFake(version, {{"inProgress", 1}});
    CHECK(stats.testCalls > 0);
  }
}

TEST_CASE("a NULL request from isend or irecv is retried, never an error",
          "[hostengine][conformance]") {
  const FakeNetStats stats = runOverFake(11, {{"busyEvery", 3}});
  // Every third post was refused and posted again.
  CHECK(stats.isendCalls > 0);
  CHECK(stats.irecvCalls > stats.recvsCompleted);
}

TEST_CASE("connect polled until it gives a comm, its state kept in the handle",
          "[hostengine][conformance]") {
  const FakeNetStats stats = runOverFake(11, {{"connectPolls", 5}});
  CHECK(stats.connectCalls >= 6);
}

TEST_CASE("irecvConsumed, when the plugin has it, once per completed receive, in order",
          "[hostengine][conformance]") {
  const FakeNetStats stats = runOverFake(11, {{"irecvConsumed", 1}});
  CHECK(stats.recvsCompleted > 0);
  CHECK(stats.irecvConsumedCalls == stats.recvsCompleted);
  CHECK(stats.irecvConsumedWrong == 0);
}
