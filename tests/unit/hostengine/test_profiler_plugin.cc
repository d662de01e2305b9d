// The host engine with the real net plugin library (libnccl-net-resilient.so,
// which exports ncclProfiler_v6 too), ranks as threads of this process: the
// engine drives the profiler as NCCL does, so the blackbox's communicator
// table and flight recorder read as they would under NCCL. With
// NCCL_RESILIENT_PROFILER=0 the profiler asks for no event and the engine
// emits none.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <latch>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "hostengine/engine.h"
#include "hostengine/loaded_plugin.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/hostengine/rank_threads.h"

#ifndef RESILIENT_NET_PLUGIN_PATH
#error "RESILIENT_NET_PLUGIN_PATH must name libnccl-net-resilient.so"
#endif

namespace he = resilient::hostengine;
namespace bb = resilient::blackbox;

namespace {

constexpr uint64_t kCommId = 0x4e0571e5c0ffee01ull;

// The environment the plugin library reads at its first init (it is unloaded
// between test cases, so each resolves it afresh). Set while no other thread
// runs.
class PluginEnvironment {
 public:
  PluginEnvironment(const std::string& blackboxDir, bool profiler) {
    setenv("NCCL_RESILIENT_BLACKBOX_DIR", blackboxDir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    setenv("NCCL_RESILIENT_SOCKET_IFNAME", "lo", 1);                // NOLINT(concurrency-mt-unsafe)
    setenv("NCCL_RESILIENT_PROFILER", profiler ? "1" : "0", 1);     // NOLINT(concurrency-mt-unsafe)
  }
  ~PluginEnvironment() {
    unsetenv("NCCL_RESILIENT_BLACKBOX_DIR");   // NOLINT(concurrency-mt-unsafe)
    unsetenv("NCCL_RESILIENT_SOCKET_IFNAME");  // NOLINT(concurrency-mt-unsafe)
    unsetenv("NCCL_RESILIENT_PROFILER");       // NOLINT(concurrency-mt-unsafe)
  }
  PluginEnvironment(const PluginEnvironment&) = delete;
  PluginEnvironment& operator=(const PluginEnvironment&) = delete;
};

// The collectives each rank runs, in order: func, seqNumber.
const std::vector<std::pair<std::string, uint64_t>> kOps = {
    {"AllReduce", 0}, {"AllReduce", 1}, {"AllReduce", 2},  // Engine::run
    {"AllReduce", 3},                                      // allReduceSum
    {"Broadcast", 0},                                      // broadcast
    {"AllReduce", 4},                                      // barrier
};

struct RankOutcome {
  std::vector<std::string> faults;
  bool profiled = false;
};

// Runs kOps on n ranks over the plugin; while every engine is still open
// (a clean finish removes the region), `whileOpen` reads the blackbox.
std::vector<RankOutcome> runJob(int n, const std::function<void()>& whileOpen) {
  auto loaded = he::loadPlugin(RESILIENT_NET_PLUGIN_PATH);
  REQUIRE(loaded.ok());
  auto transport = std::move(std::move(loaded).value().transport);
  std::vector<RankOutcome> outcomes(static_cast<size_t>(n));
  std::latch done(n);
  std::latch release(1);
  std::thread ranks([&] {
    resilient::test::runRankThreads(
        n, [&](int r, he::RendezvousClient* oob, const resilient::Status& joined) {
          RankOutcome& out = outcomes[static_cast<size_t>(r)];
          auto finish = [&] {
            done.count_down();
            release.wait();
          };
          if (oob == nullptr) {
            out.faults.push_back(joined.toString());
            finish();
            return;
          }
          he::EngineOptions o;
          o.rank = r;
          o.nranks = n;
          o.commId = kCommId;
          o.timeoutMs = 20000;
          he::Engine engine(*transport, *oob, o);
          if (auto f = engine.setup(1 << 16)) {
            out.faults.push_back("setup: " + f->describe());
            oob->abort("setup failed");
            finish();
            return;
          }
          out.profiled = engine.profiled();
          for (uint64_t i = 0; i < 3; ++i) {
            he::IterationResult result = engine.run(size_t{4000} << i, i, {.barrier = true});
            if (result.fault || result.errors != 0) {
              out.faults.push_back(result.fault ? result.fault->describe() : "wrong elements");
            }
          }
          std::vector<float> data(5000, static_cast<float>(r));
          char bytes[64] = {};
          for (const auto& f : {engine.allReduceSum(data.data(), data.data(), data.size()),
                                engine.broadcast(bytes, sizeof bytes, n - 1), engine.barrier()}) {
            if (f) {
              out.faults.push_back(f->describe());
            }
          }
          finish();
          engine.close();
          (void)oob->finish();
        });
  });
  done.wait();
  whileOpen();
  release.count_down();
  ranks.join();
  return outcomes;
}

// The region once the detector published every communicator's counters
// (it writes the table each scan): `ready` tells when.
bb::Snapshot settledSnapshot(const std::string& region,
                             const std::function<bool(const bb::Snapshot&)>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto snap = bb::readRegion(region);
    if (snap.ok() && (ready(*snap) || std::chrono::steady_clock::now() > deadline)) {
      return std::move(snap).value();
    }
    if (!snap.ok() && std::chrono::steady_clock::now() > deadline) {
      FAIL("cannot read " << region << ": " << snap.status().toString());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

TEST_CASE("the engine fills the profiler's communicator table and flight recorder as NCCL does",
          "[hostengine][profiler-plugin]") {
  resilient::test::TempDir dir;
  PluginEnvironment env(dir.path().string(), true);
  const std::string region = bb::regionPath(dir.path().string(), static_cast<uint32_t>(getpid()));
  const int n = 3;
  const auto want = static_cast<uint64_t>(kOps.size());
  bb::Snapshot snap;
  const auto outcomes = runJob(n, [&] {
    snap = settledSnapshot(region, [&](const bb::Snapshot& s) {
      size_t settled = 0;
      for (const auto& v : s.comms) {
        settled += v.comm.collCompleted == want && v.comm.inFlight == 0 ? 1 : 0;
      }
      return settled == static_cast<size_t>(n);
    });
  });
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(outcomes[static_cast<size_t>(r)].faults.empty());
    CHECK(outcomes[static_cast<size_t>(r)].profiled);
  }

  CHECK(snap.faults.empty());
  REQUIRE(snap.comms.size() == static_cast<size_t>(n));
  std::set<int> ranks;
  for (const bb::CommView& v : snap.comms) {
    const resilient_blackbox_comm& c = v.comm;
    CAPTURE(c.rank);
    ranks.insert(c.rank);
    CHECK(c.state == RESILIENT_BLACKBOX_COMM_ACTIVE);
    CHECK(c.commId == kCommId);
    CHECK(c.nranks == n);
    CHECK(c.nNodes == 1);
    CHECK(c.abiVersion == 6);
    CHECK(std::string(c.name) == "hostengine");
    CHECK(c.collEnqueued == want);
    CHECK(c.collStarted == want);
    CHECK(c.collCompleted == want);
    CHECK(c.inFlight == 0);
    CHECK(c.p2pEnqueued == 0);
    CHECK(c.faults == 0);
    CHECK(c.completedByFunc[4] == 5);  // AllReduce: seqNumbers 0..4 completed
    CHECK(c.completedByFunc[0] == 1);  // Broadcast
    REQUIRE(v.flight.size() == kOps.size());
    uint64_t lastEnqueue = 0;
    for (size_t i = 0; i < v.flight.size(); ++i) {
      const resilient_blackbox_op& op = v.flight[i];
      CAPTURE(i);
      CHECK(op.state == RESILIENT_BLACKBOX_OP_COMPLETED);
      CHECK(op.commId == kCommId);
      CHECK(op.kind == RESILIENT_BLACKBOX_OP_COLL);
      CHECK(op.collIndex == i + 1);
      CHECK(std::string(op.func) == kOps[i].first);
      CHECK(op.seqNumber == kOps[i].second);
      CHECK(std::string(op.algo) == "RING");
      CHECK(std::string(op.proto) == "SIMPLE");
      CHECK(op.nChannels == 1);
      CHECK(op.channelsStarted == 1);
      CHECK(op.channelsDone == 1);
      CHECK(op.enqueueMonoNs > lastEnqueue);
      CHECK(op.startMonoNs >= op.enqueueMonoNs);
      CHECK(op.endMonoNs >= op.startMonoNs);
      lastEnqueue = op.enqueueMonoNs;
    }
    CHECK(std::string(v.flight[0].datatype) == "ncclFloat32");
    CHECK(v.flight[0].count == 1000);
    CHECK(v.flight[3].count == 5000);
    CHECK(v.flight[4].rootOrPeer == n - 1);
    CHECK(v.flight[4].bytes == 64);
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  // Every communicator finalized, the library gone: a clean finish.
  CHECK_FALSE(std::filesystem::exists(region));
}

TEST_CASE("NCCL_RESILIENT_PROFILER=0: the profiler asks for nothing and the engine emits nothing",
          "[hostengine][profiler-plugin]") {
  resilient::test::TempDir dir;
  PluginEnvironment env(dir.path().string(), false);
  const std::string region = bb::regionPath(dir.path().string(), static_cast<uint32_t>(getpid()));
  bb::Snapshot snap;
  const auto outcomes =
      runJob(2, [&] { snap = settledSnapshot(region, [](const bb::Snapshot&) { return true; }); });
  for (const auto& out : outcomes) {
    CHECK(out.faults.empty());
    CHECK(out.profiled);  // init succeeded; its mask asks for no event
  }
  CHECK(snap.comms.empty());
  CHECK(snap.faults.empty());
}
