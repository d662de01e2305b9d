// resilient-inspect PID|FILE...: prints a process's blackbox (connections and
// fault records of the net plugin, communicator table and flight recorder of
// the profiler), live or post-mortem, as tables or as JSON (--json).
// --fail-fast sets the region's control bit: every request of that process's
// plugin then fails at its next call. With several targets (one per rank),
// or --compare, it lines up each communicator across them and names the
// ranks that are behind. --job watches the ranks of a job live (the given
// targets, or every live region in --dir): slow links, stragglers and stuck
// ranks (jobhealth/slow_links.h, jobhealth/stragglers.h,
// jobhealth/stuck_ranks.h), as the restart library does through its store for
// jobs that use it.
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "blackbox/reader.h"
#include "blackbox/snapshot_json.h"
#include "blackbox/value_names.h"
#include "common/clock.h"
#include "jobhealth/json.h"
#include "jobhealth/rank_progress.h"
#include "jobhealth/stuck_ranks.h"

namespace bb = resilient::blackbox;
namespace jh = resilient::jobhealth;

namespace {

using bb::commStateName;
using bb::connectionStateName;
using bb::hexId;
using bb::opJson;
using bb::opStateName;
using resilient::blackbox::faultClassName;

void printTable(const bb::Snapshot& s) {
  std::printf(
      "blackbox %s: pid %u on %s (%s)%s, %" PRIu64 " faults\n", s.path.c_str(), s.header.pid,
      s.header.host, s.processAlive ? "running" : "not running: post-mortem",
      (s.header.control & RESILIENT_BLACKBOX_CONTROL_FAIL_FAST) != 0 ? ", FAIL-FAST set" : "",
      s.header.faultCount);
  std::printf("\n%-18s %-4s %-8s %-22s %-22s %-16s %8s %12s %14s %5s %12s\n", "comm", "dir",
              "state", "local", "peer", "peer host", "peer pid", "done reqs", "done bytes", "out",
              "out bytes");
  for (const auto& c : s.connections) {
    std::printf("0x%-16" PRIx64 " %-4s %-8s %-22s %-22s %-16s %8u %12" PRIu64 " %14" PRIu64
                " %5" PRIu64 " %12" PRIu64 "\n",
                c.commId, c.direction == 0 ? "send" : c.direction == 1 ? "recv" : "collnet", connectionStateName(c.state), c.local,
                c.peer, c.peerHost, c.peerPid, c.completedRequests, c.completedBytes,
                c.outstandingRequests, c.outstandingBytes);
  }
  if (!s.comms.empty()) {
    const uint64_t now = resilient::monotonicNs();
    std::printf("\n%-18s %-9s %-9s %-12s %3s %9s %9s %9s %8s %6s  %s\n", "communicator", "state",
                "rank", "name", "abi", "coll enq", "started", "done", "p2p done", "flight",
                "oldest in flight");
    for (const auto& v : s.comms) {
      const auto& c = v.comm;
      std::string oldest = "-";
      if (c.oldest.opIndex != 0) {
        char buf[160];
        std::snprintf(
            buf, sizeof buf, "%s #%" PRIu64 " seq %" PRIu64 " %s%s%s", c.oldest.func,
            c.oldest.collIndex != 0 ? c.oldest.collIndex : c.oldest.opIndex, c.oldest.seqNumber,
            opStateName(c.oldest.state),
            s.processAlive && c.oldest.enqueueMonoNs != 0 ? ", age " : "",
            s.processAlive && c.oldest.enqueueMonoNs != 0
                ? (std::to_string((now - c.oldest.enqueueMonoNs) / 1000000) + " ms").c_str()
                : "");
        oldest = buf;
      }
      const std::string rank = std::to_string(c.rank) + "/" + std::to_string(c.nranks);
      std::printf("0x%-16" PRIx64 " %-9s %-9s %-12.12s %3u %9" PRIu64 " %9" PRIu64 " %9" PRIu64
                  " %8" PRIu64 " %6zu  %s\n",
                  c.commId, commStateName(c.state), rank.c_str(), c.name, c.abiVersion,
                  c.collEnqueued, c.collStarted, c.collCompleted, c.p2pCompleted, v.flight.size(),
                  oldest.c_str());
    }
  }
  if (!s.faults.empty()) {
    std::printf("\nfaults (oldest first):\n");
    for (const auto& f : s.faults) {
      std::printf("#%" PRIu64 " %s: %s\n", f.number, faultClassName(f.faultClass), f.text);
    }
  }
}

nlohmann::json comparisonJson(const std::vector<jh::CommComparison>& cmp) {
  nlohmann::json out = {{"communicators", nlohmann::json::array()}};
  for (const auto& c : cmp) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : c.ranks) {
      ranks.push_back({
          {"rank", r.comm.rank},
          {"pid", r.pid},
          {"source", r.source},
          {"process_alive", r.processAlive},
          {"state", commStateName(r.comm.state)},
          {"coll_enqueued", r.comm.collEnqueued},
          {"coll_started", r.comm.collStarted},
          {"coll_completed", r.comm.collCompleted},
          {"in_flight", r.comm.inFlight},
          {"oldest_in_flight",
           r.comm.oldest.opIndex != 0 ? opJson(r.comm.oldest) : nlohmann::json(nullptr)},
      });
    }
    out["communicators"].push_back({{"comm_id", c.commId},
                                    {"comm_hex", hexId(c.commId)},
                                    {"ranks", ranks},
                                    {"behind", c.behind},
                                    {"summary", c.summary}});
  }
  return out;
}

struct JobWatchOptions {
  std::vector<std::string> targets;  // empty: every live region in dir
  std::string dir;
  int intervalMs = 1000;
  double seconds = 0;  // 0: until interrupted
  bool json = false;
  bool record = false;
  jh::SlowLinkOptions links;
  jh::StragglerOptions stragglers;
  jh::StuckRankOptions stuckRanks;
};

// The regions of the job: the targets, or every live one in dir.
std::vector<std::string> jobRegions(const JobWatchOptions& o) {
  std::vector<std::string> paths;
  if (!o.targets.empty()) {
    for (const auto& t : o.targets) {
      paths.push_back(bb::resolveRegion(t, o.dir));
    }
    return paths;
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(RESILIENT_BLACKBOX_FILE_PREFIX, 0) == 0) {
      paths.push_back(e.path().string());
    }
  }
  return paths;
}

std::string rateText(double bytesPerS) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", bytesPerS / 1e6);
  return bytesPerS > 0 ? buf : "-";
}

void printStandings(const jh::SlowLinkDetector& links, const jh::StragglerDetector& ranks) {
  std::printf("%-6s %-6s %-24s %-24s %12s %6s %7s  %s\n", "from", "to", "local", "peer",
              "busy rate", "busy", "ratio", "");
  for (const auto& l : links.standings()) {
    std::printf("%-6d %-6d %-24s %-24s %12s %5.0f%% %6.0f%%  %s\n", l.from.rank, l.to.rank,
                l.from.address.c_str(), l.to.address.c_str(), rateText(l.bytesPerS).c_str(),
                l.busyFraction * 100, l.ratio * 100, l.slow ? "SLOW" : "");
  }
  for (const auto& r : ranks.standings()) {
    std::printf("communicator 0x%016" PRIx64
                " rank %d: last in %d of the %d collectives that waited (of %d), median lag "
                "%.1f ms%s\n",
                r.commId, r.rank.rank, r.lastCount, r.waited, r.collectives,
                static_cast<double>(r.lagNs) / 1e6, r.straggler ? "  STRAGGLER" : "");
  }
}

// Watches the job's regions every interval; prints each new report as it is
// found (and, with --record, appends it to the region of the process it
// names). Returns the number of reports.
int watchJob(const JobWatchOptions& o) {
  jh::SlowLinkDetector links(o.links);
  jh::StragglerDetector stragglers(o.stragglers);
  jh::StuckRankDetector stuckRanks(o.stuckRanks);
  // Each round gives the arrivals since two intervals before the previous
  // round (the first, all the flight recorders hold): the detectors count an
  // arrival once however often it comes.
  uint64_t sinceNs = 0;
  std::map<uint32_t, std::string> regionOfPid;
  int found = 0;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const uint64_t roundNs = resilient::wallClockNs();
    std::vector<jh::RankSample> samples;
    for (const auto& path : jobRegions(o)) {
      auto snap = bb::readRegion(path);
      if (!snap.ok() || !snap->processAlive) {
        continue;  // gone, or not a region this tool reads
      }
      regionOfPid[snap->header.pid] = path;
      samples.push_back(jh::sampleOf(*snap, -1, sinceNs));
    }
    sinceNs = roundNs - 2 * static_cast<uint64_t>(o.intervalMs) * 1000000;
    std::vector<jh::HealthReport> reports = links.update(samples);
    for (auto& r : stragglers.update(samples)) {
      reports.push_back(std::move(r));
    }
    for (auto& r : stuckRanks.update(samples)) {
      reports.push_back(std::move(r));
    }
    for (const auto& r : reports) {
      ++found;
      if (o.json) {
        std::printf("%s\n", nlohmann::json({{"report", jh::reportJson(r)}}).dump().c_str());
      } else {
        std::printf("REPORT %s\n", jh::describe(r).c_str());
      }
      if (o.record && regionOfPid.count(r.subject.pid) != 0) {
        (void)bb::recordReport(regionOfPid[r.subject.pid], jh::toBlackboxRecord(r));
      }
    }
    if (o.json) {
      std::printf("%s\n", nlohmann::json({{"wall_ns", resilient::wallClockNs()},
                                          {"processes", samples.size()},
                                          {"standings", jh::standingsJson(links.standings(),
                                                                          stragglers.standings())}})
                              .dump()
                              .c_str());
    } else {
      std::printf("--- %zu processes\n", samples.size());
      printStandings(links, stragglers);
    }
    std::fflush(stdout);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.seconds > 0 && elapsed >= o.seconds) {
      return found;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.intervalMs));
  }
}

int run(int argc, char** argv) {
  CLI::App app{
      "Prints the nccl-resilient blackbox of a process (live or post-mortem), or compares "
      "the blackboxes of several ranks."};
  std::vector<std::string> targets;
  std::string dir = "/dev/shm";
  bool json = false;
  bool failFast = false;
  bool compare = false;
  app.add_option("targets", targets,
                 "pid of the process, or the path of a blackbox file; several: compare");
  bool job = false;
  JobWatchOptions jobOptions;
  int64_t slowPercent = 40;
  int64_t slowWindowMs = 4000;
  int64_t lagMs = 20;
  int64_t stragglerWindowMs = 10000;
  int64_t stuckRankTimeoutMs = 8000;
  app.add_flag("--job", job,
               "watch a job's ranks live (the targets, or every live blackbox in --dir): name "
               "slow links, stragglers and stuck ranks as they are found");
  app.add_option("--interval-ms", jobOptions.intervalMs, "--job: time between two looks")
      ->check(CLI::Range(10, 3600000));
  app.add_option("--seconds", jobOptions.seconds, "--job: stop after this long (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_flag("--record", jobOptions.record,
               "--job: append each report to the blackbox of the process it names");
  app.add_option("--slow-link-percent", slowPercent, "--job: NCCL_RESILIENT_SLOW_LINK_PERCENT")
      ->check(CLI::Range(1, 99));
  app.add_option("--slow-link-window-ms", slowWindowMs, "--job: NCCL_RESILIENT_SLOW_LINK_WINDOW_MS")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--straggler-lag-ms", lagMs, "--job: NCCL_RESILIENT_STRAGGLER_LAG_MS")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--straggler-window-ms", stragglerWindowMs,
                 "--job: NCCL_RESILIENT_STRAGGLER_WINDOW_MS")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--stuck-rank-timeout-ms", stuckRankTimeoutMs,
                 "--job: NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS")
      ->check(CLI::Range(100, 86400000));
  app.add_option("--dir", dir, "directory of blackbox files (NCCL_RESILIENT_BLACKBOX_DIR)");
  app.add_flag("--json", json, "print JSON");
  app.add_flag("--fail-fast", failFast, "set the fail-fast control bit of the process's plugin");
  app.add_flag("--compare", compare,
               "line up each communicator across the targets and name the ranks behind");
  CLI11_PARSE(app, argc, argv);
  if (job) {
    jobOptions.targets = targets;
    jobOptions.dir = dir;
    jobOptions.json = json;
    jobOptions.links.ratio = static_cast<double>(slowPercent) / 100;
    jobOptions.links.windowNs = static_cast<uint64_t>(slowWindowMs) * 1000000ull;
    jobOptions.stragglers.minLagNs = static_cast<uint64_t>(lagMs) * 1000000ull;
    jobOptions.stragglers.windowNs = static_cast<uint64_t>(stragglerWindowMs) * 1000000ull;
    jobOptions.stuckRanks.timeoutNs = static_cast<uint64_t>(stuckRankTimeoutMs) * 1000000ull;
    watchJob(jobOptions);
    return 0;
  }
  if (targets.empty()) {
    std::fprintf(stderr, "resilient-inspect: give a pid or a blackbox file (or --job)\n");
    return 1;
  }

  std::vector<bb::Snapshot> snaps;
  for (const auto& target : targets) {
    const std::string path = bb::resolveRegion(target, dir);
    if (failFast) {
      const auto s = bb::beginAbort(path);
      if (!s.ok()) {
        std::fprintf(stderr, "resilient-inspect: %s\n", s.toString().c_str());
        return 1;
      }
    }
    auto snap = bb::readRegion(path);
    if (!snap.ok()) {
      std::fprintf(stderr, "resilient-inspect: %s\n", snap.status().toString().c_str());
      return 1;
    }
    snaps.push_back(std::move(snap).value());
  }
  if (compare || snaps.size() > 1) {
    const auto cmp = jh::compareRanks(snaps);
    if (json) {
      std::printf("%s\n", comparisonJson(cmp).dump(2).c_str());
      return 0;
    }
    for (const auto& c : cmp) {
      std::printf("communicator 0x%016" PRIx64 ": %s\n", c.commId, c.summary.c_str());
      for (const auto& r : c.ranks) {
        std::printf(
            "  rank %-4d pid %-8u %-9s coll enqueued %-8" PRIu64 " completed %-8" PRIu64 " %s\n",
            r.comm.rank, r.pid, r.processAlive ? "running" : "gone", r.comm.collEnqueued,
            r.comm.collCompleted,
            r.comm.oldest.opIndex != 0 ? (std::string("in ") + r.comm.oldest.func + " seq " +
                                          std::to_string(r.comm.oldest.seqNumber) + " (" +
                                          opStateName(r.comm.oldest.state) + ")")
                                             .c_str()
                                       : "");
      }
    }
    return 0;
  }
  if (json) {
    std::printf("%s\n", bb::snapshotJson(snaps[0]).dump(2).c_str());
  } else {
    printTable(snaps[0]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-inspect: %s\n", e.what());
    return 2;
  }
}
