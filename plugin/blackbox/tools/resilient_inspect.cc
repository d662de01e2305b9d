// resilient-inspect PID|FILE...: prints a process's blackbox (connections and
// fault records of the net plugin, communicator table and flight recorder of
// the profiler), live or post-mortem, as tables or as JSON (--json).
// --fail-fast sets the region's control bit: every request of that process's
// plugin then fails at its next call. With several targets (one per rank),
// or --compare, it lines up each communicator across them and names the
// ranks that are behind.
#include <time.h>

#include <bit>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "plugin/blackbox/rank_progress.h"
#include "plugin/blackbox/reader.h"

namespace bb = resilient::blackbox;

namespace {

// ncclFunc_t values, as in completedByFunc.
const char* const kFuncNames[RESILIENT_BLACKBOX_FUNCS] = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
    "Send",      "Recv",   "AlltoAll",  "Scatter",       "Gather",    "Other"};

uint64_t monoNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const char* faultClassName(uint32_t c) {
  switch (c) {
    case RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR: return "transport error";
    case RESILIENT_BLACKBOX_FAULT_PEER_EXITED: return "peer process exited";
    case RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE: return "peer unresponsive";
    case RESILIENT_BLACKBOX_FAULT_PEER_STUCK: return "peer stuck";
    case RESILIENT_BLACKBOX_FAULT_ABORTED: return "aborted";
    case RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR: return "local error";
    case RESILIENT_BLACKBOX_FAULT_COLL_HUNG: return "collective hung";
    case RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT: return "progress silent";
    default: return "unknown";
  }
}

const char* stateName(uint32_t s) {
  return s == RESILIENT_BLACKBOX_CONN_OPEN      ? "open"
         : s == RESILIENT_BLACKBOX_CONN_FAULTED ? "faulted"
                                                : "free";
}

const char* commStateName(uint32_t s) {
  return s == RESILIENT_BLACKBOX_COMM_ACTIVE      ? "active"
         : s == RESILIENT_BLACKBOX_COMM_FINALIZED ? "finalized"
                                                  : "free";
}

const char* opStateName(uint32_t s) {
  switch (s) {
    case RESILIENT_BLACKBOX_OP_ENQUEUED: return "enqueued";
    case RESILIENT_BLACKBOX_OP_RUNNING: return "running";
    case RESILIENT_BLACKBOX_OP_COMPLETED: return "completed";
    case RESILIENT_BLACKBOX_OP_HUNG: return "hung";
    case RESILIENT_BLACKBOX_OP_ABANDONED: return "abandoned";
    default: return "none";
  }
}

const char* stepStateName(uint32_t s) {
  switch (s) {
    case 0: return "";
    case 8: return "SendGPUWait";
    case 9: return "SendWait";
    case 10: return "RecvWait";
    case 11: return "RecvFlushWait";
    case 12: return "RecvGPUWait";
    case 20: return "SendPeerWait";
    default: return "other";
  }
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

nlohmann::json channels(uint64_t mask) {
  auto a = nlohmann::json::array();
  for (int c = 0; c < 64; ++c) {
    if ((mask >> c & 1u) != 0) {
      a.push_back(c);
    }
  }
  return a;
}

// Microseconds between two monotonic stamps, or null when one is missing.
nlohmann::json spanUs(uint64_t from, uint64_t to) {
  return from != 0 && to >= from ? nlohmann::json((to - from) / 1000) : nlohmann::json(nullptr);
}

nlohmann::json opJson(const resilient_blackbox_op& op) {
  nlohmann::json j = {
      {"op_index", op.opIndex},
      {"kind", op.kind == RESILIENT_BLACKBOX_OP_COLL ? "coll" : "p2p"},
      {"coll_index", op.collIndex},
      {"seq_number", op.seqNumber},
      {"func", op.func},
      {"state", opStateName(op.state)},
      {"datatype", op.datatype},
      {"count", op.count},
      {"bytes", op.bytes},
      {"algo", op.algo},
      {"proto", op.proto},
      {"n_channels", op.nChannels},
      {"channels_started", channels(op.channelsStarted)},
      {"channels_done", channels(op.channelsDone)},
      {"stuck_channels", channels(op.channelsStarted & ~op.channelsDone)},
      {"proxy_ops", op.proxyOps},
      {"last_step_state", stepStateName(op.lastStepState)},
      {"enqueue_mono_ns", op.enqueueMonoNs},
      {"start_mono_ns", op.startMonoNs},
      {"end_mono_ns", op.endMonoNs},
      {"queued_us", spanUs(op.enqueueMonoNs, op.startMonoNs)},
      {"run_us", spanUs(op.startMonoNs, op.endMonoNs)},
      {"gpu_start_ns", op.gpuStartNs},
      {"gpu_stop_ns", op.gpuStopNs},
      {"gpu_us", spanUs(op.gpuStartNs, op.gpuStopNs)},
  };
  j[op.kind == RESILIENT_BLACKBOX_OP_COLL ? "root" : "peer"] = op.rootOrPeer;
  return j;
}

nlohmann::json commJson(const bb::CommView& v, bool alive, uint64_t nowNs) {
  const auto& c = v.comm;
  nlohmann::json byFunc = nlohmann::json::object();
  for (int f = 0; f < RESILIENT_BLACKBOX_FUNCS; ++f) {
    if (c.completedByFunc[f] != 0) {
      byFunc[kFuncNames[f]] = c.completedByFunc[f];
    }
  }
  nlohmann::json j = {
      {"comm_id", c.commId},
      {"comm_hex", hex(c.commId)},
      {"state", commStateName(c.state)},
      {"rank", c.rank},
      {"nranks", c.nranks},
      {"nodes", c.nNodes},
      {"name", c.name},
      {"abi_version", c.abiVersion},
      {"coll_enqueued", c.collEnqueued},
      {"coll_started", c.collStarted},
      {"coll_completed", c.collCompleted},
      {"p2p_enqueued", c.p2pEnqueued},
      {"p2p_completed", c.p2pCompleted},
      {"in_flight", c.inFlight},
      {"completed_by_func", byFunc},
      {"init_wall_ns", c.initWallNs},
      {"last_enqueue_mono_ns", c.lastEnqueueMonoNs},
      {"last_progress_mono_ns", c.lastProgressMonoNs},
      {"updated_mono_ns", c.updatedMonoNs},
      {"faults", c.faults},
      {"dropped_events", c.droppedEvents},
      {"flight_written", c.flightWritten},
      {"oldest_in_flight", c.oldest.opIndex != 0 ? opJson(c.oldest) : nlohmann::json(nullptr)},
  };
  if (alive && c.lastProgressMonoNs != 0 && nowNs >= c.lastProgressMonoNs) {
    j["progress_age_ms"] = (nowNs - c.lastProgressMonoNs) / 1000000;
  }
  auto flight = nlohmann::json::array();
  for (const auto& op : v.flight) {
    flight.push_back(opJson(op));
  }
  j["flight_recorder"] = std::move(flight);
  return j;
}

nlohmann::json toJson(const bb::Snapshot& s) {
  nlohmann::json j;
  j["path"] = s.path;
  j["version"] = s.header.version;
  j["pid"] = s.header.pid;
  j["host"] = s.header.host;
  j["process_alive"] = s.processAlive;
  j["start_wall_ns"] = s.header.startWallNs;
  j["heartbeat_wall_ns"] = s.header.heartbeatWallNs;
  j["heartbeat_mono_ns"] = s.header.heartbeatMonoNs;
  j["fail_fast"] = (s.header.control & RESILIENT_BLACKBOX_CONTROL_FAIL_FAST) != 0;
  j["fault_count"] = s.header.faultCount;
  j["connections"] = nlohmann::json::array();
  for (const auto& c : s.connections) {
    j["connections"].push_back({
        {"comm_id", c.commId},
        {"direction", c.direction == 0 ? "send" : "recv"},
        {"state", stateName(c.state)},
        {"local", c.local},
        {"peer", c.peer},
        {"peer_host", c.peerHost},
        {"peer_pid", c.peerPid},
        {"completed_requests", c.completedRequests},
        {"completed_bytes", c.completedBytes},
        {"outstanding_requests", c.outstandingRequests},
        {"outstanding_bytes", c.outstandingBytes},
        {"last_progress_mono_ns", c.lastProgressMonoNs},
        {"updated_mono_ns", c.updatedMonoNs},
    });
  }
  j["faults"] = nlohmann::json::array();
  for (const auto& f : s.faults) {
    nlohmann::json fj = {
        {"number", f.number},      {"class", faultClassName(f.faultClass)},
        {"remote", f.remote != 0}, {"comm_id", f.commId},
        {"wall_ns", f.wallNs},     {"mono_ns", f.monoNs},
        {"peer", f.peer},          {"peer_host", f.peerHost},
        {"peer_pid", f.peerPid},   {"text", f.text},
    };
    if (f.opKind != 0) {
      fj["rank"] = f.rank;
      fj["op"] = f.op;
      fj["seq_number"] = f.seqNumber;
      fj["coll_index"] = f.collIndex;
      fj["stuck_channels"] = channels(f.stuckChannels);
      fj["stalled_ms"] = f.stalledMs;
    }
    j["faults"].push_back(std::move(fj));
  }
  const uint64_t now = monoNowNs();
  j["communicators"] = nlohmann::json::array();
  for (const auto& v : s.comms) {
    j["communicators"].push_back(commJson(v, s.processAlive, now));
  }
  return j;
}

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
                c.commId, c.direction == 0 ? "send" : "recv", stateName(c.state), c.local, c.peer,
                c.peerHost, c.peerPid, c.completedRequests, c.completedBytes, c.outstandingRequests,
                c.outstandingBytes);
  }
  if (!s.comms.empty()) {
    const uint64_t now = monoNowNs();
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
                                    {"comm_hex", hex(c.commId)},
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
      const auto s = bb::setControlBits(path, RESILIENT_BLACKBOX_CONTROL_FAIL_FAST);
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
    std::printf("%s\n", toJson(snaps[0]).dump(2).c_str());
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
