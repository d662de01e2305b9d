// A stand-in for a rank of the restart loop, for the monitor process tests:
// creates the status page, starts its monitor through spawn.h, prints
// "ready <pid> <monitor pid>" and then behaves as told:
//   ping         phase running, progress every 10 ms, until killed
//   silent       phase running, no progress after the phase change
//   ignore-term  as silent, with SIGTERM ignored (the monitor must SIGKILL)
//   done         ping for --for-ms, then phase completing, the termination
//                barrier with the other ranks (as the loop does), phase done,
//                exit after 100 ms
//   failed       ping for --for-ms, then its terminated mark (as Loop::leave
//                writes it), phase failed and exit
//   failed-unrecorded  as failed without the mark (the store did not answer
//                the rank: Loop::run, StoreUnavailable)
//   withdrawn    ping for --for-ms, then phase withdrawn and exit at once
//                (a joiner whose initial rank is another process's)
//   exit         ping for --for-ms, then exit(3) while running
// --liveness-ms N: with a liveness link to its monitor (the loop's
// RankLiveness), NCCL_RESILIENT_LIVENESS_TIMEOUT_MS=N.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "restart/loop/monitoring/rank_liveness.h"
#include "restart/monitor/spawn.h"
#include "restart/protocol/job_keys.h"
#include "restart/protocol/status_page.h"
#include "restart/protocol/terminated_ranks.h"
#include "store/open_store.h"

namespace rm = resilient::restart::monitor;
namespace rp = resilient::restart::protocol;

namespace {

void setPhase(rp::StatusPage& page, rp::RankPhase phase) {
  page.autoProgressNs.store(resilient::monotonicNs(), std::memory_order_release);
  page.phase.store(static_cast<uint32_t>(phase), std::memory_order_release);
}

void pingFor(rp::StatusPage& page, int64_t ms) {
  const uint64_t end = resilient::monotonicNs() + static_cast<uint64_t>(ms) * 1000000;
  while (ms < 0 || resilient::monotonicNs() < end) {
    page.autoProgressNs.store(resilient::monotonicNs(), std::memory_order_release);
    ::usleep(10000);
  }
}

int run(int argc, char** argv) {
  CLI::App app{"fake rank for the monitor process tests"};
  rm::MonitorConfig c;
  std::string monitor;
  std::string behaviour = "ping";
  int iteration = 0;
  int64_t forMs = 200;
  int64_t livenessMs = 0;
  int64_t interval = 100, hbInterval = 50, hbTimeout = 1000, soft = 400, hard = 5000,
          barrier = 10000, grace = 300, storeTimeout = 3000;
  app.add_option("--monitor", monitor)->required();
  app.add_option("--store", c.storeUrl)->required();
  app.add_option("--job", c.jobId)->required();
  app.add_option("--rank", c.rank)->required();
  app.add_option("--world-size", c.worldSize)->required();
  app.add_option("--log-file", c.logFile);
  app.add_option("--pid-file", c.pidFile);
  app.add_option("--blackbox-dir", c.blackboxDir);
  app.add_option("--behaviour", behaviour);
  app.add_option("--iteration", iteration);
  app.add_option("--for-ms", forMs);
  app.add_option("--liveness-ms", livenessMs);
  app.add_option("--interval-ms", interval);
  app.add_option("--heartbeat-interval-ms", hbInterval);
  app.add_option("--heartbeat-timeout-ms", hbTimeout);
  app.add_option("--soft-timeout-ms", soft);
  app.add_option("--hard-timeout-ms", hard);
  app.add_option("--barrier-timeout-ms", barrier);
  app.add_option("--grace-ms", grace);
  app.add_option("--store-timeout-ms", storeTimeout);
  CLI11_PARSE(app, argc, argv);
  c.interval = rm::Millis(interval);
  c.heartbeatInterval = rm::Millis(hbInterval);
  c.heartbeatTimeout = rm::Millis(hbTimeout);
  c.softTimeout = rm::Millis(soft);
  c.hardTimeout = rm::Millis(hard);
  c.barrierTimeout = rm::Millis(barrier);
  c.grace = rm::Millis(grace);
  c.storeTimeout = rm::Millis(storeTimeout);

  if (behaviour == "ignore-term") {
    ::signal(SIGTERM, SIG_IGN);
  }
  rp::StatusPageMapping mapping = rp::StatusPageMapping::create(c.rank);
  rp::StatusPage& page = mapping.page();
  page.iteration.store(iteration, std::memory_order_release);
  c.statusFd = mapping.fd();
  std::optional<resilient::restart::RankLiveness> liveness;
  if (livenessMs > 0) {
    ::setenv("NCCL_RESILIENT_LIVENESS_TIMEOUT_MS", std::to_string(livenessMs).c_str(), 1);
    liveness.emplace();
    c.livenessFd = liveness->monitorEnd();
  }
  const pid_t monitorPid = rm::spawnMonitor(c, monitor);
  if (liveness) {
    liveness->start();
  }
  setPhase(page, rp::RankPhase::kRunning);
  std::printf("ready %d %d\n", static_cast<int>(::getpid()), static_cast<int>(monitorPid));
  std::fflush(stdout);

  if (behaviour == "ping") {
    pingFor(page, -1);
  } else if (behaviour == "silent" || behaviour == "ignore-term") {
    for (;;) {
      ::pause();
    }
  } else if (behaviour == "done") {
    pingFor(page, forMs);
    setPhase(page, rp::RankPhase::kCompleting);
    const auto store = resilient::store::openStore(c.storeUrl, resilient::store::ClientOptions{});
    resilient::store::BarrierArrival a;
    a.name = rp::JobKeys(c.jobId).terminationBarrier();
    a.rank = c.rank;
    a.worldSize = c.worldSize;
    store->barrier(a, rm::Millis(10000));
    setPhase(page, rp::RankPhase::kDone);
    ::usleep(100000);
    return 0;
  } else if (behaviour == "failed" || behaviour == "failed-unrecorded") {
    pingFor(page, forMs);
    if (behaviour == "failed") {
      const auto store = resilient::store::openStore(c.storeUrl, resilient::store::ClientOptions{});
      rp::markTerminated(*store, rp::JobKeys(c.jobId), c.rank, "left: a test's error");
    }
    setPhase(page, rp::RankPhase::kFailed);
    return 1;
  } else if (behaviour == "withdrawn") {
    pingFor(page, forMs);
    setPhase(page, rp::RankPhase::kWithdrawn);
    return 76;  // kExitWithdrew
  } else if (behaviour == "exit") {
    pingFor(page, forMs);
    return 3;
  }
  std::fprintf(stderr, "fake-rank: unknown behaviour %s\n", behaviour.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake-rank: %s\n", e.what());
    return 2;
  }
}
