#include "tests/unit/restart/loop/rank_threads.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "restart/loop/loop.h"
#include "restart/protocol/fault_log.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/terminated_ranks.h"

namespace resilient::test {

using std::chrono::milliseconds;

restart::Options threadRankOptions(int rank, int worldSize) {
  restart::Options o;
  o.rank = rank;
  o.worldSize = worldSize;
  o.useMonitorProcess = false;
  o.blackboxDir.clear();
  o.monitorThreadInterval = milliseconds(50);
  o.monitorProcessInterval = milliseconds(50);
  o.heartbeatInterval = milliseconds(50);
  o.progressWatchdogInterval = milliseconds(50);
  o.softTimeout = milliseconds(5000);
  o.hardTimeout = milliseconds(6000);
  o.heartbeatTimeout = milliseconds(3000);
  o.barrierTimeout = milliseconds(10000);
  o.completionTimeout = milliseconds(10000);
  o.finalizeTimeout = milliseconds(5000);
  o.healthCheckTimeout = milliseconds(5000);
  return o;
}

std::string RankOutcome::errorText() const {
  if (!error) {
    return "";
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "?";
  }
}

std::function<void(int rank, restart::CallContext&)> throwsInFirstIteration(int culprit,
                                                                           std::string what) {
  return [culprit, what = std::move(what)](int rank, restart::CallContext& ctx) {
    if (ctx.iteration() == 0 && rank == culprit) {
      throw std::runtime_error(what);
    }
    while (ctx.iteration() == 0 && !ctx.cancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ctx.checkCancelled();
  };
}

std::vector<RankOutcome> runRanks(int worldSize,
                                  const std::function<void(int, restart::Options&)>& adjust,
                                  const std::function<void(int, restart::CallContext&)>& fn,
                                  std::shared_ptr<store::Store> store,
                                  const std::vector<int>& only) {
  if (!store) {
    store = std::make_shared<store::MemoryStore>();
  }
  std::vector<RankOutcome> out(static_cast<size_t>(worldSize));
  std::vector<std::thread> threads;
  for (int r = 0; r < worldSize; ++r) {
    if (!only.empty() && std::find(only.begin(), only.end(), r) == only.end()) {
      continue;
    }
    threads.emplace_back([&, r] {
      restart::Options o = threadRankOptions(r, worldSize);
      if (adjust) {
        adjust(r, o);
      }
      out[static_cast<size_t>(r)] =
          runRank(store, std::move(o), false, [&](restart::CallContext& ctx) { fn(r, ctx); });
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return out;
}

RankOutcome runRank(std::shared_ptr<store::Store> store, restart::Options options, bool join,
                    const std::function<void(restart::CallContext&)>& fn,
                    std::function<void(std::function<void()>)> followStoreRestarts) {
  RankOutcome result;
  try {
    restart::Loop loop(std::move(options),
                       restart::LoopEnvironment{.store = std::move(store),
                                                .setProcessEnvironment = false,
                                                .join = join,
                                                .followStoreRestarts =
                                                    std::move(followStoreRestarts)});
    try {
      loop.run(fn);
    } catch (...) {
      result.error = std::current_exception();
    }
    result.state = loop.state();
    result.timeline = loop.timeline();
  } catch (...) {
    result.error = std::current_exception();
  }
  return result;
}

void recordDeath(store::Store& store, const std::string& jobId, int rank, int worldSize,
                 int iteration) {
  const restart::protocol::JobKeys keys(jobId);
  restart::protocol::FaultRecord r;
  r.iteration = iteration;
  r.reason = restart::protocol::FaultReason::kTerminated;
  r.subject = rank;
  r.culprit = rank;
  r.detail = "the rank's process died (simulated)";
  restart::protocol::FaultLog(store, keys).publish(r);
  restart::protocol::markTerminated(store, keys, rank, "terminated");
  store.barrier(
      {keys.iterationBarrier(), static_cast<uint64_t>(iteration), rank, worldSize, false});
}

}  // namespace resilient::test
