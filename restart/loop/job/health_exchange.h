// The job's health comparison for one iteration (docs/observability.md):
// slow links, stragglers and stuck ranks found across the ranks through
// the store.
//
// One thread per active rank while the iteration runs. Every `interval` it
//  - ships this rank's sample (its blackbox: links' bytes and busy time,
//    the collectives' arrival times of the last few intervals; the
//    collectives no profiler sees, collective_arrivals.h; what its code said:
//    its last ping, hang protection) to the store under the iteration's
//    health key of its active rank;
//  - on active rank 0 only: reads every active rank's sample (one
//    multi-get), feeds the detectors (jobhealth/slow_links.h,
//    jobhealth/stragglers.h) and writes each new report to the store (a
//    numbered record); logs one WARN per report; with the report's action
//    "restart", publishes a fault naming the rank (reason health-report), so
//    that the job restarts and the culprit is replaced like any other;
//  - on every rank: reads the reports it has not seen; one naming this
//    process (a link's end, or the straggler) goes into its blackbox as a
//    report record, with a WARN, and into the timeline ("health report").
// When it stops, active rank 0 records what it compared in the timeline
// ("health compared": rounds, samples, link windows, collectives).
// The store failing is not this thread's to report: it stops and the loop's
// own store calls find it. Its store calls take at most max(interval, 1 s),
// so that a frozen store delays the loop's stop of it (recovery) no longer;
// the iteration's start makes no store call for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <thread>

#include "jobhealth/report.h"
#include "jobhealth/slow_links.h"
#include "jobhealth/stragglers.h"
#include "jobhealth/stuck_ranks.h"
#include "restart/loop/interruption.h"
#include "restart/loop/job/rank_registry.h"
#include "restart/loop/monitoring/blackbox_watch.h"
#include "restart/loop/text/timeline.h"
#include "restart/protocol/fault_log.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

// What the rank's own code said last (CallContext): its last ping
// (monotonic ns, 0 none) and whether hang protection is off.
struct RankActivity {
  uint64_t lastPingMonoNs = 0;
  bool hangProtectionOff = false;
};

struct HealthExchangeConfig {
  int iteration = 0;
  int initialRank = 0;
  int activeRank = 0;
  int activeWorldSize = 1;
  std::chrono::milliseconds interval{1000};
  jobhealth::SlowLinkOptions links;
  jobhealth::StragglerOptions stragglers;
  jobhealth::StuckRankOptions stuckRanks;
  bool restartOnSlowLink = false;
  bool restartOnStraggler = false;
  bool restartOnStuckRank = false;
  std::function<RankActivity()> activity;  // empty: nothing said
};

class HealthExchange {
 public:
  HealthExchange(store::Store& store, const protocol::JobKeys& keys, protocol::FaultLog& faults,
                 RankRegistry& registry, BlackboxWatch& blackbox, Interruption& interruption,
                 Timeline& timeline, HealthExchangeConfig config);
  ~HealthExchange();  // stops and joins the thread
  HealthExchange(const HealthExchange&) = delete;
  HealthExchange& operator=(const HealthExchange&) = delete;

 private:
  void run(const std::stop_token& stop);
  void ship();
  void compare();
  void readReports();
  void act(const jobhealth::HealthReport& report);

  store::Store& store_;
  const protocol::JobKeys& keys_;
  protocol::FaultLog& faults_;
  RankRegistry& registry_;
  BlackboxWatch& blackbox_;
  Interruption& interruption_;
  Timeline& timeline_;
  const HealthExchangeConfig config_;
  jobhealth::SlowLinkDetector links_;
  jobhealth::StragglerDetector stragglers_;
  jobhealth::StuckRankDetector stuck_;
  std::string host_;
  uint32_t pid_ = 0;
  const std::chrono::milliseconds callTimeout_;
  int64_t reportsSeen_ = 0;
  uint64_t rounds_ = 0;
  uint64_t samples_ = 0;
  std::jthread thread_;
};

}  // namespace resilient::restart
