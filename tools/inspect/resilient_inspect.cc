// resilient-inspect PID|FILE...: prints a process's blackbox (connections and
// fault records of the net plugin, communicator table and flight recorder of
// the profiler), live or post-mortem, as tables or as JSON (--json).
// --fail-fast sets the region's control bit: every request of that process's
// plugin then fails at its next call. With several targets (one per rank),
// or --compare, it lines up each communicator across them and names the
// ranks that are behind.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "blackbox/value_names.h"
#include "blackbox/rank_progress.h"
#include "blackbox/reader.h"
#include "blackbox/snapshot_json.h"
#include "common/clock.h"

namespace bb = resilient::blackbox;

namespace {

using bb::commStateName;
using bb::connectionStateName;
using resilient::blackbox::faultClassName;
using bb::hexId;
using bb::opJson;
using bb::opStateName;

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
                c.commId, c.direction == 0 ? "send" : "recv", connectionStateName(c.state), c.local,
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

nlohmann::json comparisonJson(const std::vector<bb::CommComparison>& cmp) {
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
                 "pid of the process, or the path of a blackbox file; several: compare")
      ->required();
  app.add_option("--dir", dir, "directory of blackbox files (NCCL_RESILIENT_BLACKBOX_DIR)");
  app.add_flag("--json", json, "print JSON");
  app.add_flag("--fail-fast", failFast, "set the fail-fast control bit of the process's plugin");
  app.add_flag("--compare", compare,
               "line up each communicator across the targets and name the ranks behind");
  CLI11_PARSE(app, argc, argv);

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
    const auto cmp = bb::compareRanks(snaps);
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
