// resilient-inspect PID|FILE: prints a process's blackbox (connections and
// fault records of the nccl-resilient plugins), live or post-mortem, as a
// table or as JSON (--json). --fail-fast sets the region's control bit: every
// request of that process's plugin then fails at its next call.
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "plugin/blackbox/reader.h"

namespace bb = resilient::blackbox;

namespace {

const char* faultClassName(uint32_t c) {
  switch (c) {
    case RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR: return "transport error";
    case RESILIENT_BLACKBOX_FAULT_PEER_EXITED: return "peer process exited";
    case RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE: return "peer unresponsive";
    case RESILIENT_BLACKBOX_FAULT_LINK_DOWN: return "link down";
    case RESILIENT_BLACKBOX_FAULT_PEER_STUCK: return "peer stuck";
    case RESILIENT_BLACKBOX_FAULT_ABORTED: return "aborted";
    case RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR: return "local error";
    default: return "unknown";
  }
}

const char* stateName(uint32_t s) {
  return s == RESILIENT_BLACKBOX_CONN_OPEN      ? "open"
         : s == RESILIENT_BLACKBOX_CONN_FAULTED ? "faulted"
                                                : "free";
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
    j["faults"].push_back({
        {"number", f.number},
        {"class", faultClassName(f.faultClass)},
        {"remote", f.remote != 0},
        {"comm_id", f.commId},
        {"wall_ns", f.wallNs},
        {"mono_ns", f.monoNs},
        {"peer", f.peer},
        {"peer_host", f.peerHost},
        {"peer_pid", f.peerPid},
        {"text", f.text},
    });
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
  if (!s.faults.empty()) {
    std::printf("\nfaults (oldest first):\n");
    for (const auto& f : s.faults) {
      std::printf("#%" PRIu64 " %s: %s\n", f.number, faultClassName(f.faultClass), f.text);
    }
  }
}

int run(int argc, char** argv) {
  CLI::App app{"Prints the nccl-resilient blackbox of a process (live or post-mortem)."};
  std::string target;
  std::string dir = "/dev/shm";
  bool json = false;
  bool failFast = false;
  app.add_option("target", target, "pid of the process, or the path of a blackbox file")
      ->required();
  app.add_option("--dir", dir, "directory of blackbox files (NCCL_RESILIENT_BLACKBOX_DIR)");
  app.add_flag("--json", json, "print JSON");
  app.add_flag("--fail-fast", failFast, "set the fail-fast control bit of the process's plugin");
  CLI11_PARSE(app, argc, argv);

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
  if (json) {
    std::printf("%s\n", toJson(*snap).dump(2).c_str());
  } else {
    printTable(*snap);
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
