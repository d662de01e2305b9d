#include "tools/nettest/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "tools/common/host_tool.h"
#include "tools/nettest/report.h"

namespace resilient::nettest {
namespace {

std::optional<json> readJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  try {
    return json::parse(in);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

int runLauncher(const Config& c, const harness::Environment& env,
                const std::vector<std::string>& argv) {
  const int n = c.options.ranks;
  const std::string master = env.get("MASTER_ADDR", "127.0.0.1");
  int port = 0;
  if (std::optional<std::string> p = env.get("MASTER_PORT")) {
    port = std::atoi(p->c_str());
  }
  std::string tmpl = env.get("TMPDIR", "/tmp") + "/resilient-nettest.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("resilient-nettest: mkdtemp");
    return tools::kExitUsage;
  }
  const std::string dir = tmpl;
  harness::LocalLaunchOptions launch;
  launch.host = master;
  launch.port = static_cast<uint16_t>(port);
  launch.nranks = n;
  launch.argv = argv;
  launch.base = env.list();
  launch.names = kLaunchEnvNames;
  launch.extra = [&](int r) {
    harness::EnvironmentList extra = {{kEnvDir, dir}};
    for (const harness::RankFault& f : c.faults) {
      if (f.rank == r) {
        extra.emplace_back(kEnvFault, f.spec);
      }
    }
    return extra;
  };
  Result<harness::LocalLaunch> local = harness::planLocalLaunch(launch);
  if (!local.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", local.status().toString().c_str());
    return tools::kExitUsage;
  }
  harness::LaunchPlan& plan = local->plan;
  for (const auto& k : c.kills) {
    plan.injections.push_back({k.rank, SIGKILL, k.atMs});
  }
  for (const auto& s : c.stops) {
    plan.injections.push_back({s.rank, SIGSTOP, s.atMs});
  }
  plan.startTimeoutMs = c.timeoutMs + 30000;
  plan.pinRanks = c.options.pinCpus;
  plan.runTimeoutMs = c.faultMode ? c.faultWindowMs + 15000 : 0;

  Result<harness::LaunchOutcome> launched = harness::launchLocal(*local);
  if (!launched.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", launched.status().toString().c_str());
    return tools::kExitUsage;
  }
  const harness::LaunchOutcome& outcome = *launched;

  std::vector<std::optional<json>> results(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const std::string path = dir + "/rank" + std::to_string(r) + ".json";
    results[static_cast<size_t>(r)] = readJsonFile(path);
    ::unlink(path.c_str());
  }
  ::rmdir(dir.c_str());

  return reportLaunchedRun(c, LaunchedRun{.plan = plan, .outcome = outcome, .results = results});
}

}  // namespace resilient::nettest
