#include "tools/nettest/rank.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "hostengine/engine.h"
#include "hostengine/rendezvous.h"
#include "plugin/transport/raw/raw_transport.h"
#include "tools/common/host_tool.h"
#include "tools/harness/launched_rank.h"
#include "tools/harness/report.h"
#include "tools/harness/transport_choice.h"
#include "tools/nettest/launcher.h"
#include "tools/nettest/report.h"

namespace resilient::nettest {
namespace {

using resilient::monotonicNs;

Result<int> envInt(const harness::Environment& env, const char* name) {
  std::optional<std::string> v = env.get(name);
  if (!v) {
    return resilient::invalidUsage(std::string(name) + " is not set");
  }
  try {
    size_t used = 0;
    const long value = std::stol(*v, &used);
    if (used != v->size() || value < 0 || value > 1000000000) {
      throw std::invalid_argument(*v);
    }
    return static_cast<int>(value);
  } catch (const std::exception&) {
    return resilient::invalidUsage(std::string(name) + "='" + *v + "' is not a number");
  }
}

}  // namespace

int runRank(const Config& c, const harness::Environment& env) {
  Result<int> rankR = envInt(env, "RANK");
  Result<int> worldR = envInt(env, "WORLD_SIZE");
  if (!rankR.ok() || !worldR.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n",
                 (!rankR.ok() ? rankR : worldR).status().toString().c_str());
    return tools::kExitUsage;
  }
  const int rank = *rankR;
  const int world = *worldR;
  resilient::log::setRank(rank);
  const std::optional<std::string> resultDir = env.get(kEnvDir);
  const bool launched = resultDir.has_value();
  const harness::LaunchedRank launch = harness::readLaunchedRank(env, kLaunchEnvNames);
  const uint64_t token = launch.token;
  const std::string& master = launch.master;
  Result<int> portR = envInt(env, "MASTER_PORT");
  if (world < 2 || rank >= world || !portR.ok() || *portR > 65535) {
    std::fprintf(stderr,
                 "resilient-nettest: rank mode needs RANK < WORLD_SIZE (>= 2) and MASTER_PORT\n");
    return tools::kExitUsage;
  }
  if (c.pattern == he::Pattern::kPingPong && world != 2) {
    std::fprintf(stderr, "resilient-nettest: pingpong needs WORLD_SIZE=2\n");
    return tools::kExitUsage;
  }

  json result{{"rank", rank},          {"pid", static_cast<int>(::getpid())},
              {"setup_ok", false},     {"fault", nullptr},
              {"errors", 0},           {"sizes", json::array()},
              {"rows", json::array()}, {"window_expired", false}};
  auto finish = [&](int code) {
    result["exit_code"] = code;
    if (resultDir) {
      tools::writeFileAtomically(*resultDir + "/rank" + std::to_string(rank) + ".json",
                                 result.dump(1));
    } else if (c.faultMode && !c.options.jsonPath.empty()) {
      // A rank started by hand in fault mode: its own outcome (fault, peer, times).
      tools::writeFileAtomically(c.options.jsonPath, result.dump(2) + "\n");
    }
    return code;
  };
  auto reportFault = [&](const he::Fault& f, const char* when) {
    if (!launched) {  // under our launcher, the launcher reports for every rank
      std::fprintf(stderr, "# rank %d: FAULT %s (detected at CLOCK_MONOTONIC %llu ns): %s\n", rank,
                   when, static_cast<unsigned long long>(f.detectedNs), f.describe().c_str());
      std::fflush(stderr);
    }
    result["fault"] = faultJson(f);
  };

  // The transport: a plugin loaded as NCCL loads it, or our raw TCP pump.
  transport::raw::RawTcpOptions raw;
  raw.bindHost = transport::raw::localAddressToward(master);
  raw.sockets = c.options.rawSockets;
  raw.token = token;
  raw.connectTimeoutMs = c.timeoutMs;
  auto opened = harness::openTransport(
      c.options.rawTcp ? std::nullopt : std::optional<std::string>(c.options.plugin), raw);
  if (!opened.ok()) {
    std::fprintf(stderr, "# rank %d: cannot load the plugin: %s\n", rank,
                 opened.status().toString().c_str());
    result["load_error"] = opened.status().toString();
    return finish(tools::kExitUsage);
  }
  std::unique_ptr<resilient::transport::Transport> transport = std::move(opened).value();

  // Out of band: rank 0 serves the rendezvous, everybody connects to it.
  harness::RendezvousPlace place;
  place.master = master;
  place.port = static_cast<uint16_t>(*portR);
  place.rank = rank;
  place.world = world;
  place.token = token;
  place.timeoutMs = c.timeoutMs;
  place.inheritedListenFd = launch.listenFd;
  place.listenWhenNotInherited = true;  // a rank 0 started by hand
  place.serverSocket = launch.serverSocket;
  std::unique_ptr<he::RendezvousServer> server;
  if (rank == 0) {
    Result<std::unique_ptr<he::RendezvousServer>> s = harness::serveRendezvous(place);
    if (!s.ok()) {
      std::fprintf(stderr, "# rank 0: rendezvous server: %s\n", s.status().toString().c_str());
      return finish(tools::kExitUsage);
    }
    server = std::move(s).value();
  }
  Result<std::unique_ptr<he::RendezvousClient>> clientR = harness::joinRendezvous(place);
  if (!clientR.ok()) {
    std::fprintf(stderr, "# rank %d: rendezvous: %s\n", rank, clientR.status().toString().c_str());
    return finish(tools::kExitUsage);
  }
  he::RendezvousClient& oob = **clientR;

  he::EngineOptions eo;
  eo.rank = rank;
  eo.nranks = world;
  eo.pattern = c.pattern;
  eo.device = c.options.device;
  eo.depth = c.options.depth;
  eo.chunkBytes = c.chunkBytes;
  eo.multiRecv = c.options.multiRecv;
  eo.minPieceBytes = c.minPieceBytes;
  eo.timeoutMs = c.timeoutMs;
  eo.commId = token ^ 0x6e657474657374ull;
  he::Engine engine(*transport, oob, eo);
  if (std::optional<he::Fault> f = engine.setup(c.maxBytes)) {
    reportFault(*f, "during setup");
    oob.abort("rank " + std::to_string(rank) + " setup failed: " + f->describe());
    engine.close();
    return finish(tools::kExitFault);
  }
  result["setup_ok"] = true;
  result["transport"] = transportJson(c, *transport, engine);
  result["transport_text"] = describeTransport(c, *transport, engine);

  if (Status st = oob.barrier(); !st.ok()) {
    he::Fault f;
    f.call = "barrier (out of band)";
    f.status = st;
    f.detectedNs = monotonicNs();
    reportFault(f, "before the measured phase");
    engine.close();
    return finish(tools::kExitFault);
  }
  const uint64_t startNs = monotonicNs();
  result["start_ns"] = startNs;
  if (rank == 0) {
    if (launch.startFd) {
      harness::signalStart(*launch.startFd, startNs);
    }
    printRunHeader(c, world, describeTransport(c, *transport, engine), engine);
    std::fflush(stdout);
  }

  const uint64_t windowEnd = startNs + static_cast<uint64_t>(c.faultWindowMs) * 1000000ull;
  std::vector<harness::SizeResult> rows;
  std::optional<he::Fault> fault;
  uint64_t totalErrors = 0;
  uint64_t iteration = 0;
  bool windowExpired = false;
  for (int cycle = 0; !fault && !windowExpired; ++cycle) {
    for (size_t size : c.sizes) {
      double timed = 0;
      uint64_t sizeErrors = 0;
      const int total = c.options.warmup + c.options.iters;
      int i = 0;
      for (; i < total; ++i) {
        he::IterationResult r = engine.run(size, iteration++, {.barrier = !c.faultMode});
        sizeErrors += r.errors;
        if (r.fault) {
          fault = std::move(r.fault);
          break;
        }
        if (i >= c.options.warmup) {
          timed += r.seconds;
        }
        if (c.faultMode && monotonicNs() > windowEnd) {
          windowExpired = true;
          break;
        }
      }
      totalErrors += sizeErrors;
      if (fault || windowExpired) {
        break;
      }
      const double mean = timed / c.options.iters;
      if (cycle == 0) {
        result["sizes"].push_back(json{{"bytes", he::effectiveBytes(c.pattern, world, size)},
                                       {"seconds", mean},
                                       {"errors", sizeErrors}});
      }
      if (!c.faultMode) {
        char mine[64];
        std::snprintf(mine, sizeof(mine), "%.9g %llu", mean,
                      static_cast<unsigned long long>(sizeErrors));
        Result<std::vector<std::string>> all = oob.allGather(mine);
        if (!all.ok()) {
          he::Fault f;
          f.call = "gather of results (out of band)";
          f.status = all.status();
          f.detectedNs = monotonicNs();
          fault = f;
          break;
        }
        double slowest = 0;
        uint64_t errors = 0;
        for (const std::string& part : *all) {
          double t = 0;
          unsigned long long e = 0;
          if (std::sscanf(part.c_str(), "%lg %llu", &t, &e) == 2) {
            slowest = std::max(slowest, t);
            errors += e;
          }
        }
        rows.push_back(harness::makeSizeResult({.pattern = c.pattern,
                                                .nranks = world,
                                                .bytes = size,
                                                .seconds = slowest,
                                                .errors = errors}));
        if (rank == 0) {
          std::printf("%s\n", harness::tableRow(c.pattern, rows.back()).c_str());
          std::fflush(stdout);
        }
      }
    }
    if (!c.faultMode) {
      break;
    }
  }
  result["errors"] = totalErrors;
  result["conformance_notes"] = conformanceNotes(engine.conformance());
  result["window_expired"] = windowExpired;
  result["iterations_run"] = iteration;
  json rowsJson = json::array();
  for (const auto& r : rows) {
    rowsJson.push_back(rowJson(c.pattern, r));
  }
  result["rows"] = rowsJson;

  int code = totalErrors > 0 ? tools::kExitDataErrors : tools::kExitOk;
  if (fault) {
    reportFault(*fault, ("in iteration " + std::to_string(fault->iteration) + " (" +
                         std::to_string(fault->bytes) + " B)")
                            .c_str());
    // NCCL's abort: close every comm with whatever is outstanding; tell the others.
    engine.close();
    oob.abort("rank " + std::to_string(rank) + ": " + fault->describe());
    code = tools::kExitFault;
  } else {
    if (rank == 0 && !c.faultMode) {
      printSummary(rows);
      if (!launched) {
        printConformance(result["conformance_notes"]);
      }
      if (!launched && !c.options.jsonPath.empty()) {
        const json report = reportJson(c, RunReport{.nranks = world,
                                                    .transport = result["transport"],
                                                    .rows = rowsJson,
                                                    .conformance = result["conformance_notes"],
                                                    .ok = totalErrors == 0});
        tools::writeFileAtomically(c.options.jsonPath, report.dump(2) + "\n");
      }
    }
    if (!c.faultMode) {
      (void)oob.finish();
    }
    engine.close();
    if (c.faultMode) {
      std::fprintf(stderr, "# rank %d: no fault detected within %lld ms\n", rank,
                   static_cast<long long>(c.faultWindowMs));
      code = tools::kExitFault;
    }
  }
  if (server) {
    server->stop();
  }
  return finish(code);
}

}  // namespace resilient::nettest
