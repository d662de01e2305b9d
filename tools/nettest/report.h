// resilient-nettest's report: the tables it prints (nccl-tests style; in
// fault mode, which rank detected what and when) and the JSON it writes
// (--json, and each rank's result file for the launcher).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hostengine/engine.h"
#include "plugin/transport/transport.h"
#include "tools/harness/launcher.h"
#include "tools/harness/report.h"
#include "tools/nettest/config.h"

namespace resilient::nettest {

using nlohmann::json;

// "8 B", "64 MiB", "1000 B": exact units only.
std::string humanBytes(size_t bytes);

json faultJson(const he::Fault& f);
json rowJson(he::Pattern pattern, const harness::SizeResult& r);

// The transport of a set-up engine: "plugin "X" from PATH (ncclNetPlugin_vN),
// device ...", and as JSON.
std::string describeTransport(const Config& c, transport::Transport& t, const he::Engine& engine);
json transportJson(const Config& c, transport::Transport& t, const he::Engine& engine);

// What --json holds besides the configuration.
struct RunReport {
  int nranks = 0;
  json transport = json::object();
  json rows = json::array();  // rowJson per size
  json faults = json::array();
  json injections = json::array();
  json conformance = json::array();  // conformanceNotes of every rank, merged
  bool ok = false;
};

// What the plugin did that NCCL tolerates (the run is not wrong for it), as
// texts; and printed as a section of the report.
json conformanceNotes(const he::ConformanceNotes& notes);
void printConformance(const json& notes);
json reportJson(const Config& c, const RunReport& report);

// Rank 0, before the measured phase: what runs, on what, how.
void printRunHeader(const Config& c, int world, const std::string& transportText,
                    const he::Engine& engine);
// The last lines of the table: wrong values and the mean bus bandwidth.
void printSummary(const std::vector<harness::SizeResult>& rows);

// The launcher's report of a whole run, from the ranks' exits and result
// files (results[r]: rank r's, if it wrote one): the fault-mode table or
// the failed ranks, --json; returns the exit status of the run.
struct LaunchedRun {
  const harness::LaunchPlan& plan;
  const harness::LaunchOutcome& outcome;
  const std::vector<std::optional<json>>& results;
};
int reportLaunchedRun(const Config& c, const LaunchedRun& run);

}  // namespace resilient::nettest
