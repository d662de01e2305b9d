#include "tools/nettest/report.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <utility>

#include "plugin/transport/external/loader.h"
#include "tools/common/host_tool.h"

namespace resilient::nettest {

std::string humanBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4 && static_cast<size_t>(v) % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f %s", v, units[u]);
  return text;
}

json faultJson(const he::Fault& f) {
  return json{{"call", f.call},
              {"peer", f.peer},
              {"status", f.status.toString()},
              {"error_kind", resilient::errorKindName(f.status.kind())},
              {"plugin_warning", f.pluginWarning},
              {"timed_out", f.timedOut},
              {"since_iteration_start_ms", f.sinceStartMs},
              {"detected_ns", f.detectedNs},
              {"bytes", f.bytes},
              {"iteration", f.iteration}};
}

json rowJson(he::Pattern pattern, const harness::SizeResult& r) {
  return json{{"bytes", r.bytes},    {"count", r.count},      {"type", he::elementType(pattern)},
              {"time_us", r.timeUs}, {"algbw_gbps", r.algBw}, {"busbw_gbps", r.busBw},
              {"errors", r.errors}};
}

std::string describeTransport(const Config& c, resilient::transport::Transport& t,
                              const he::Engine& engine) {
  const auto& p = engine.properties();
  std::string text;
  if (c.options.rawTcp) {
    text = "raw TCP sockets of our own (" + std::to_string(c.options.rawSockets) +
           " per connection, no plugin)";
  } else {
    auto& ext = static_cast<resilient::transport::external::ExternalTransport&>(t);
    text = std::string("plugin \"") + ext.name() + "\" from " + ext.libraryPath() +
           " (ncclNetPlugin_v" + std::to_string(ext.abiVersion()) + ")";
  }
  text += ", device " + std::to_string(c.options.device) + " " +
          (p.name != nullptr ? p.name : "?") + ": maxRecvs " + std::to_string(p.maxRecvs) +
          ", speed " + std::to_string(p.speedMbps) + " Mbps";
  return text;
}

json transportJson(const Config& c, resilient::transport::Transport& t, const he::Engine& engine) {
  json j{{"raw_tcp", c.options.rawTcp},
         {"name", t.name()},
         {"max_recvs", engine.properties().maxRecvs},
         {"pieces_per_recv", engine.piecesPerItem()},
         {"depth", engine.depth()},
         {"chunk_bytes", engine.chunkBytes()},
         {"min_piece_bytes", c.minPieceBytes}};
  if (c.options.rawTcp) {
    j["sockets"] = c.options.rawSockets;
  } else {
    auto& ext = static_cast<resilient::transport::external::ExternalTransport&>(t);
    j["plugin"] = ext.libraryPath();
    j["abi_version"] = ext.abiVersion();
  }
  return j;
}

json reportJson(const Config& c, const RunReport& report) {
  const json& rows = report.rows;
  double sum = 0;
  uint64_t errors = 0;
  for (const json& r : rows) {
    sum += r["busbw_gbps"].get<double>();
    errors += r["errors"].get<uint64_t>();
  }
  return json{{"tool", "resilient-nettest"},
              {"pattern", he::patternName(c.pattern)},
              {"ranks", report.nranks},
              {"iterations", c.options.iters},
              {"warmup", c.options.warmup},
              {"transport", report.transport},
              {"results", rows},
              {"avg_busbw_gbps", rows.empty() ? 0.0 : sum / static_cast<double>(rows.size())},
              {"errors", errors},
              {"faults", report.faults},
              {"injections", report.injections},
              {"conformance_notes", report.conformance},
              {"ok", report.ok}};
}

json conformanceNotes(const he::ConformanceNotes& notes) {
  json out = json::array();
  const uint64_t unreported = notes.sizesNotReported.load(std::memory_order_relaxed);
  if (unreported > 0) {
    out.push_back("test() did not report sizes (" + std::to_string(unreported) +
                  " completed receives): NCCL tolerates this; profiler byte counts will be "
                  "wrong");
  }
  return out;
}

void printConformance(const json& notes) {
  if (notes.empty()) {
    return;
  }
  std::printf("# Conformance notes (NCCL tolerates these; the data is not wrong for them):\n");
  for (const json& n : notes) {
    std::printf("#   %s\n", n.get<std::string>().c_str());
  }
}

void printSummary(const std::vector<harness::SizeResult>& rows) {
  uint64_t errors = 0;
  double sum = 0;
  for (const auto& r : rows) {
    errors += r.errors;
    sum += r.busBw;
  }
  std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(errors),
              errors == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g\n#\n",
              rows.empty() ? 0.0 : sum / static_cast<double>(rows.size()));
}

void printRunHeader(const Config& c, int world, const std::string& transportText,
                    const he::Engine& engine) {
  std::printf("# resilient-nettest: host engine on host buffers (test infrastructure, not NCCL)\n");
  std::printf(
      "# %s on %d ranks, sizes %s .. %s (x%llu), %d iterations after %d warm-up, every "
      "byte checked\n",
      he::patternName(c.pattern), world, humanBytes(c.sizes.front()).c_str(),
      humanBytes(c.sizes.back()).c_str(), static_cast<unsigned long long>(c.options.factor),
      c.options.iters, c.options.warmup);
  std::printf("# transport: %s\n", transportText.c_str());
  std::printf(
      "# pipeline: %d requests in flight per connection, chunks of %s, grouped receives "
      "of up to %d pieces (>= %s each)\n",
      engine.depth(), humanBytes(engine.chunkBytes()).c_str(), engine.piecesPerItem(),
      humanBytes(c.minPieceBytes).c_str());
  if (c.faultMode) {
    std::printf("# fault mode: ranks run until a fault is detected or %lld ms have passed\n",
                static_cast<long long>(c.faultWindowMs));
  } else {
    std::printf("#\n%s\n", harness::tableHeader(c.pattern).c_str());
  }
}

namespace {

// The ranks a fault is injected into (killed, stopped or given NCCL_RESILIENT_FAULT).
std::vector<bool> victimsOf(const Config& c) {
  std::vector<bool> victim(static_cast<size_t>(c.options.ranks), false);
  for (const auto& k : c.kills) {
    victim[static_cast<size_t>(k.rank)] = true;
  }
  for (const auto& s : c.stops) {
    victim[static_cast<size_t>(s.rank)] = true;
  }
  for (const auto& f : c.faults) {
    victim[static_cast<size_t>(f.rank)] = true;
  }
  return victim;
}

// What was injected: the report's list, the earliest signal sent (the reference of
// the detection times; 0 when none was) and whether every planned signal was sent.
struct Injections {
  json list = json::array();
  uint64_t firstNs = 0;
  bool allSent = true;
};

Injections injectionsOf(const Config& c, const LaunchedRun& run) {
  Injections out;
  for (const harness::Injection& i : run.plan.injections) {
    const harness::RankOutcome& target = run.outcome.ranks[static_cast<size_t>(i.rank)];
    const bool sent = target.injectedSignal == i.signal && target.injectedNs != 0;
    out.allSent = out.allSent && sent;
    json j{{"kind", i.signal == SIGKILL ? "kill" : "stop"},
           {"rank", i.rank},
           {"at_ms", i.atMs},
           {"sent", sent}};
    if (sent) {
      j["sent_after_start_ms"] = static_cast<double>(target.injectedNs - run.outcome.startNs) / 1e6;
      out.firstNs = out.firstNs == 0 ? target.injectedNs : std::min(out.firstNs, target.injectedNs);
    }
    out.list.push_back(j);
  }
  for (const harness::RankFault& f : c.faults) {
    out.list.push_back(json{{"kind", "fault"}, {"rank", f.rank}, {"spec", f.spec}});
  }
  return out;
}

// The first rank's transport description that came back.
json transportOf(const std::vector<std::optional<json>>& results) {
  for (const auto& r : results) {
    if (r && r->contains("transport")) {
      return (*r)["transport"];
    }
  }
  return json::object();
}

// What the run amounts to: the report's rows and faults, and whether it passed.
struct Verdict {
  json rows = json::array();
  json faults = json::array();
  bool ok = true;
};

// Without fault mode: rank 0's rows; every rank that did not exit 0, said.
void judgeMeasuredRun(const Config& c, const LaunchedRun& run, Verdict& v) {
  const std::vector<std::optional<json>>& results = run.results;
  if (results[0] && (*results[0])["rows"].is_array()) {
    v.rows = (*results[0])["rows"];
  }
  for (int r = 0; r < c.options.ranks; ++r) {
    const harness::RankOutcome& o = run.outcome.ranks[static_cast<size_t>(r)];
    const auto& res = results[static_cast<size_t>(r)];
    if (!o.exited || o.exitCode != 0) {
      v.ok = false;
      std::printf("# rank %d: %s%s\n", r, harness::describeExit(o).c_str(),
                  res && !(*res)["fault"].is_null()
                      ? (": " + (*res)["fault"]["status"].get<std::string>()).c_str()
                      : "");
    }
    if (res && !(*res)["fault"].is_null()) {
      json f = (*res)["fault"];
      f["rank"] = r;
      f["outcome"] = "unexpected fault";
      v.faults.push_back(f);
    }
  }
  if (run.outcome.startTimedOut) {
    std::printf("# the ranks did not finish their setup within %lld ms\n",
                static_cast<long long>(run.plan.startTimeoutMs));
    v.ok = false;
  }
}

// Fault mode: per size, the slowest surviving rank, over the sizes every survivor
// completed (printed as a table, added to v's rows). The number of survivors.
int survivorsTable(const Config& c, const LaunchedRun& run, const std::vector<bool>& victim,
                   Verdict& v) {
  std::map<size_t, std::pair<double, uint64_t>> bySize;
  std::map<size_t, int> seen;
  int survivors = 0;
  for (int r = 0; r < c.options.ranks; ++r) {
    const auto& res = run.results[static_cast<size_t>(r)];
    if (victim[static_cast<size_t>(r)]) {
      continue;
    }
    ++survivors;
    if (!res) {
      continue;
    }
    for (const json& s : (*res)["sizes"]) {
      const size_t bytes = s["bytes"].get<size_t>();
      auto& slot = bySize[bytes];
      slot.first = std::max(slot.first, s["seconds"].get<double>());
      slot.second += s["errors"].get<uint64_t>();
      ++seen[bytes];
    }
  }
  std::vector<harness::SizeResult> table;
  for (const auto& [bytes, sizeResult] : bySize) {
    if (seen[bytes] == survivors) {
      table.push_back(harness::makeSizeResult({.pattern = c.pattern,
                                               .nranks = c.options.ranks,
                                               .bytes = bytes,
                                               .seconds = sizeResult.first,
                                               .errors = sizeResult.second}));
      v.rows.push_back(rowJson(c.pattern, table.back()));
    }
  }
  if (!table.empty()) {
    std::printf("# sizes completed by every surviving rank before the fault:\n%s\n",
                harness::tableHeader(c.pattern).c_str());
    for (const auto& row : table) {
      std::printf("%s\n", harness::tableRow(c.pattern, row).c_str());
    }
  }
  return survivors;
}

void printInjections(const json& injections, const harness::LaunchOutcome& outcome) {
  for (const json& i : injections) {
    if (i["kind"] == "fault") {
      std::printf("# injected: NCCL_RESILIENT_FAULT=%s on rank %d\n",
                  i["spec"].get<std::string>().c_str(), i["rank"].get<int>());
    } else if (i["sent"].get<bool>()) {
      std::printf("# injected: %s to rank %d at %lld ms (sent %.3f ms after the start)\n",
                  i["kind"] == "kill" ? "SIGKILL" : "SIGSTOP", i["rank"].get<int>(),
                  static_cast<long long>(i["at_ms"].get<int64_t>()),
                  i["sent_after_start_ms"].get<double>());
    } else {
      std::printf("# NOT injected: %s to rank %d at %lld ms (%s)\n",
                  i["kind"] == "kill" ? "SIGKILL" : "SIGSTOP", i["rank"].get<int>(),
                  static_cast<long long>(i["at_ms"].get<int64_t>()),
                  outcome.started ? "the rank had ended before" : "the run never started");
    }
  }
}

// A survivor that gave up on its own deadline closes its comms, and its peers then
// see that close: what they see after it is not a detection of the injected fault.
// The first such give-up (UINT64_MAX: none).
uint64_t firstGiveUpNs(const Config& c, const LaunchedRun& run, const std::vector<bool>& victim) {
  uint64_t first = UINT64_MAX;
  for (int r = 0; r < c.options.ranks; ++r) {
    const auto& res = run.results[static_cast<size_t>(r)];
    if (!victim[static_cast<size_t>(r)] && res && !(*res)["fault"].is_null() &&
        (*res)["fault"]["timed_out"].get<bool>()) {
      first = std::min(first, (*res)["fault"]["detected_ns"].get<uint64_t>());
    }
  }
  return first;
}

// One rank of a fault-mode run, judged.
struct RankVerdict {
  std::string state;           // the outcome column
  double sinceInjection = -1;  // ms from the first injection to its detection; -1: none
  bool good = false;
};

RankVerdict judgeRank(const Config& c, const harness::RankOutcome& o,
                      const std::optional<json>& res, const json& f, bool isVictim,
                      uint64_t injectedNs, uint64_t giveUpNs) {
  RankVerdict v;
  if (f.is_null()) {
    if (isVictim) {
      v.state = o.injectedSignal == SIGSTOP ? std::string("stopped (injected)")
                : o.injectedSignal != 0     ? harness::describeExit(o) + " (injected)"
                                            : harness::describeExit(o);
      v.good = true;
    } else if (!res) {
      v.state = "no result (" + harness::describeExit(o) + ")";
    } else if ((*res)["window_expired"].get<bool>()) {
      v.state = "not detected";
    } else {
      v.state = "no fault";
    }
  } else {
    const uint64_t at = f["detected_ns"].get<uint64_t>();
    if (injectedNs != 0 && at >= injectedNs) {
      v.sinceInjection = static_cast<double>(at - injectedNs) / 1e6;
    }
    if (f["timed_out"].get<bool>()) {
      v.state = "not detected";  // our deadline, not the transport's error
    } else if (injectedNs != 0 && at < injectedNs) {
      v.state = "early fault";
    } else if (v.sinceInjection > static_cast<double>(c.timeoutMs)) {
      v.state = "late";
    } else if (at >= giveUpNs) {
      v.state = "after a timeout";
    } else {
      v.state = isVictim ? "detected (victim)" : "detected";
      v.good = true;
    }
  }
  if (res && (*res)["errors"].get<uint64_t>() > 0) {
    v.state += ", data errors";
    v.good = false;
  }
  return v;
}

void printRankLine(int r, const RankVerdict& v, const json& f) {
  char detect[32] = "-";
  char inIter[32] = "-";
  if (v.sinceInjection >= 0) {
    std::snprintf(detect, sizeof(detect), "%.3f", v.sinceInjection);
  }
  if (!f.is_null()) {
    std::snprintf(inIter, sizeof(inIter), "%.3f", f["since_iteration_start_ms"].get<double>());
  }
  std::printf(
      "  %4d  %-14s %-12s %4s %12s %12s  %s\n", r, v.state.c_str(),
      f.is_null() ? "-" : f["call"].get<std::string>().c_str(),
      f.is_null() || f["peer"].get<int>() < 0 ? "-" : std::to_string(f["peer"].get<int>()).c_str(),
      detect, inIter, f.is_null() ? "" : f["status"].get<std::string>().c_str());
  if (!f.is_null() && !f["plugin_warning"].get<std::string>().empty()) {
    std::printf("  %4s  plugin: %s\n", "", f["plugin_warning"].get<std::string>().c_str());
  }
}

// Fault mode: the survivors' table, what was injected, and every rank's detection.
void judgeFaultRun(const Config& c, const LaunchedRun& run, const Injections& injections,
                   Verdict& v) {
  const std::vector<bool> victim = victimsOf(c);
  const int survivors = survivorsTable(c, run, victim, v);
  std::printf("#\n");
  printInjections(injections.list, run.outcome);
  std::printf("# %4s  %-14s %-12s %4s %12s %12s  %s\n", "rank", "outcome", "call", "peer",
              "detect(ms)", "in-iter(ms)", "status");
  int detected = 0;
  const uint64_t giveUpNs = firstGiveUpNs(c, run, victim);
  for (int r = 0; r < c.options.ranks; ++r) {
    const harness::RankOutcome& o = run.outcome.ranks[static_cast<size_t>(r)];
    const auto& res = run.results[static_cast<size_t>(r)];
    const bool isVictim = victim[static_cast<size_t>(r)];
    json f = res && !(*res)["fault"].is_null() ? (*res)["fault"] : json();
    const RankVerdict rv = judgeRank(c, o, res, f, isVictim, injections.firstNs, giveUpNs);
    if (!isVictim) {
      detected += rv.good ? 1 : 0;
      v.ok = v.ok && rv.good;
    }
    printRankLine(r, rv, f);
    json entry = f.is_null() ? json::object() : f;
    entry["rank"] = r;
    entry["outcome"] = rv.state;
    entry["victim"] = isVictim;
    entry["pid"] = static_cast<int>(o.pid);
    entry["exit"] = harness::describeExit(o);
    if (rv.sinceInjection >= 0) {
      entry["since_injection_ms"] = rv.sinceInjection;
    }
    v.faults.push_back(entry);
  }
  if (!injections.allSent || !run.outcome.started) {
    v.ok = false;
  }
  std::printf("# %d of %d surviving ranks detected the fault within %g s: %s\n", detected,
              survivors, c.options.timeoutSec, v.ok ? "OK" : "FAILED");
}

// Every rank's notes, each text once.
json mergedConformance(const std::vector<std::optional<json>>& results) {
  json conformance = json::array();
  for (const auto& r : results) {
    if (r && r->contains("conformance_notes")) {
      for (const json& note : (*r)["conformance_notes"]) {
        if (std::find(conformance.begin(), conformance.end(), note) == conformance.end()) {
          conformance.push_back(note);
        }
      }
    }
  }
  return conformance;
}

}  // namespace

int reportLaunchedRun(const Config& c, const LaunchedRun& run) {
  const Injections injections = injectionsOf(c, run);
  const json transport = transportOf(run.results);
  Verdict v;
  if (!c.faultMode) {
    judgeMeasuredRun(c, run, v);
  } else {
    judgeFaultRun(c, run, injections, v);
  }
  const json conformance = mergedConformance(run.results);
  printConformance(conformance);
  if (!c.options.jsonPath.empty()) {
    const json report = reportJson(c, RunReport{.nranks = c.options.ranks,
                                                .transport = transport,
                                                .rows = v.rows,
                                                .faults = v.faults,
                                                .injections = injections.list,
                                                .conformance = conformance,
                                                .ok = v.ok});
    tools::writeFileAtomically(c.options.jsonPath, report.dump(2) + "\n");
  }
  std::fflush(stdout);
  if (v.ok) {
    return tools::kExitOk;
  }
  bool dataErrors = false;
  for (const json& r : v.rows) {
    dataErrors = dataErrors || r["errors"].get<uint64_t>() > 0;
  }
  return dataErrors ? tools::kExitDataErrors : tools::kExitFault;
}

}  // namespace resilient::nettest
