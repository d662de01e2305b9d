// resilient-nettest: conformance, performance and chaos tool for NCCL net
// plugins, on the host engine (no GPU). It loads any net plugin .so as NCCL
// does, runs ping-pong, send/recv, ring all-reduce or all-to-all among N
// ranks (processes), checks every byte, and prints a table in the spirit of
// nccl-tests. Without RANK/WORLD_SIZE in the environment it launches the N
// ranks itself (and applies --kill/--stop/--fault); with them it is that one
// rank. --raw-tcp runs the same patterns over plain TCP sockets of our own,
// the physical baseline. The host engine is test infrastructure, not NCCL.
//
// The tool in files: config (the command line), rank (one rank's run),
// launcher (the N ranks started locally), report (tables and JSON).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "tools/common/host_tool.h"
#include "tools/harness/launcher.h"
#include "tools/nettest/config.h"
#include "tools/nettest/launcher.h"
#include "tools/nettest/rank.h"

namespace resilient::nettest {
namespace {

int run(int argc, char** argv) {
  Options o;
  CLI::App app{kDescription};
  addOptions(app, o);
  CLI11_PARSE(app, argc, argv);

  Result<Config> config = makeConfig(o);
  if (!config.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", config.status().message().c_str());
    return tools::kExitUsage;
  }
  const harness::Environment env = harness::Environment::snapshot();
  if (std::optional<std::string> level = env.get("NCCL_DEBUG")) {
    if (auto parsed = resilient::log::parseLevel(*level)) {
      unsigned long mask = ~0ul;
      if (std::optional<std::string> subsys = env.get("NCCL_DEBUG_SUBSYS")) {
        mask = resilient::log::parseSubsystems(*subsys).value_or(~0ul);
      }
      resilient::log::configure(*parsed, mask);
    }
  }
  tools::ignoreSigpipe();
  if (env.get("RANK") && env.get("WORLD_SIZE")) {
    return runRank(*config, env);
  }
  std::vector<std::string> args(argv, argv + argc);
  return runLauncher(*config, env, args);
}

}  // namespace
}  // namespace resilient::nettest

int main(int argc, char** argv) {
  return resilient::tools::guardedMain("resilient-nettest", resilient::nettest::run, argc, argv);
}
