#include "blackbox/snapshot_json.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "blackbox/value_names.h"
#include "common/clock.h"

namespace resilient::blackbox {

namespace {

// ncclFunc_t values, as in completedByFunc.
const char* const kFuncNames[RESILIENT_BLACKBOX_FUNCS] = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
    "Send",      "Recv",   "AlltoAll",  "Scatter",       "Gather",    "Other"};

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

}  // namespace

const char* connectionStateName(uint32_t s) {
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

std::string hexId(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
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
      {"last_step_state", op.lastStepState == 0 ? "" : stepStateName(op.lastStepState)},
      {"enqueue_mono_ns", op.enqueueMonoNs},
      {"start_mono_ns", op.startMonoNs},
      {"end_mono_ns", op.endMonoNs},
      {"queued_us", spanUs(op.enqueueMonoNs, op.startMonoNs)},
      {"run_us", spanUs(op.startMonoNs, op.endMonoNs)},
      {"gpu_start_ns", op.gpuStartNs},
      {"gpu_stop_ns", op.gpuStopNs},
      {"gpu_us", spanUs(op.gpuStartNs, op.gpuStopNs)},
      {"user_tag", op.userTag},
      {"sync_wait_ns", op.syncWaitNs},
      {"symmetric", (op.opFlags & RESILIENT_BLACKBOX_OP_FLAG_SYMMETRIC) != 0},
  };
  j[op.kind == RESILIENT_BLACKBOX_OP_COLL ? "root" : "peer"] = op.rootOrPeer;
  return j;
}

namespace {

nlohmann::json commJson(const CommView& v, bool alive, uint64_t nowNs) {
  const auto& c = v.comm;
  nlohmann::json byFunc = nlohmann::json::object();
  for (int f = 0; f < RESILIENT_BLACKBOX_FUNCS; ++f) {
    if (c.completedByFunc[f] != 0) {
      byFunc[kFuncNames[f]] = c.completedByFunc[f];
    }
  }
  nlohmann::json j = {
      {"comm_id", c.commId},
      {"comm_hex", hexId(c.commId)},
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

}  // namespace

nlohmann::json snapshotJson(const Snapshot& s) {
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
        {"direction", c.direction == 0 ? "send" : c.direction == 1 ? "recv" : "collnet"},
        {"state", connectionStateName(c.state)},
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
        {"busy_ns", c.busyNs},
        {"rtt_ns", c.rttNs},
    });
  }
  j["faults"] = nlohmann::json::array();
  for (const auto& f : s.faults) {
    nlohmann::json fj = {
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
        {"report", RESILIENT_BLACKBOX_IS_REPORT(f.faultClass)},
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
  const uint64_t now = monotonicNs();
  j["communicators"] = nlohmann::json::array();
  for (const auto& v : s.comms) {
    j["communicators"].push_back(commJson(v, s.processAlive, now));
  }
  return j;
}

}  // namespace resilient::blackbox
