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

// What one rank knows of itself, and the result it writes at the end: the file its
// launcher reads, or (a rank started by hand in fault mode) --json.
struct RankState {
  const Config& c;
  int rank = 0;
  int world = 0;
  harness::LaunchedRank launch;
  std::optional<std::string> resultDir;  // set: started by our launcher
  json result;

  bool launched() const { return resultDir.has_value(); }

  int finish(int code) {
    result["exit_code"] = code;
    if (resultDir) {
      tools::writeFileAtomically(*resultDir + "/rank" + std::to_string(rank) + ".json",
                                 result.dump(1));
    } else if (c.faultMode && !c.options.jsonPath.empty()) {
      // A rank started by hand in fault mode: its own outcome (fault, peer, times).
      tools::writeFileAtomically(c.options.jsonPath, result.dump(2) + "\n");
    }
    return code;
  }

  void reportFault(const he::Fault& f, const char* when) {
    if (!launched()) {  // under our launcher, the launcher reports for every rank
      std::fprintf(stderr, "# rank %d: FAULT %s (detected at CLOCK_MONOTONIC %llu ns): %s\n", rank,
                   when, static_cast<unsigned long long>(f.detectedNs), f.describe().c_str());
      std::fflush(stderr);
    }
    result["fault"] = faultJson(f);
  }
};

// The transport: a plugin loaded as NCCL loads it, or our raw TCP pump. Null when
// it cannot be loaded (said on stderr and in the result).
std::unique_ptr<transport::Transport> loadTransport(RankState& s) {
  const Config& c = s.c;
  transport::raw::RawTcpOptions raw;
  raw.bindHost = transport::raw::localAddressToward(s.launch.master);
  raw.sockets = c.options.rawSockets;
  raw.token = s.launch.token;
  raw.connectTimeoutMs = c.timeoutMs;
  auto opened = harness::openTransport(
      c.options.rawTcp ? std::nullopt : std::optional<std::string>(c.options.plugin), raw);
  if (!opened.ok()) {
    std::fprintf(stderr, "# rank %d: cannot load the plugin: %s\n", s.rank,
                 opened.status().toString().c_str());
    s.result["load_error"] = opened.status().toString();
    return nullptr;
  }
  return std::move(opened).value();
}

// Out of band: rank 0 serves the rendezvous, everybody connects to it. The client
// is null when either failed (said on stderr).
struct OutOfBand {
  std::unique_ptr<he::RendezvousServer> server;
  std::unique_ptr<he::RendezvousClient> client;
};

OutOfBand joinOutOfBand(const RankState& s, uint16_t port) {
  harness::RendezvousPlace place;
  place.master = s.launch.master;
  place.port = port;
  place.rank = s.rank;
  place.world = s.world;
  place.token = s.launch.token;
  place.timeoutMs = s.c.timeoutMs;
  place.inheritedListenFd = s.launch.listenFd;
  place.listenWhenNotInherited = true;  // a rank 0 started by hand
  place.serverSocket = s.launch.serverSocket;
  OutOfBand oob;
  if (s.rank == 0) {
    Result<std::unique_ptr<he::RendezvousServer>> server = harness::serveRendezvous(place);
    if (!server.ok()) {
      std::fprintf(stderr, "# rank 0: rendezvous server: %s\n", server.status().toString().c_str());
      return oob;
    }
    oob.server = std::move(server).value();
  }
  Result<std::unique_ptr<he::RendezvousClient>> client = harness::joinRendezvous(place);
  if (!client.ok()) {
    std::fprintf(stderr, "# rank %d: rendezvous: %s\n", s.rank, client.status().toString().c_str());
    return oob;
  }
  oob.client = std::move(client).value();
  return oob;
}

he::EngineOptions engineOptions(const RankState& s) {
  const Config& c = s.c;
  he::EngineOptions eo;
  eo.rank = s.rank;
  eo.nranks = s.world;
  eo.pattern = c.pattern;
  eo.device = c.options.device;
  eo.depth = c.options.depth;
  eo.chunkBytes = c.chunkBytes;
  eo.multiRecv = c.options.multiRecv;
  eo.minPieceBytes = c.minPieceBytes;
  eo.timeoutMs = c.timeoutMs;
  eo.commId = s.launch.token ^ 0x6e657474657374ull;
  return eo;
}

he::Fault outOfBandFault(const char* call, const Status& st) {
  he::Fault f;
  f.call = call;
  f.status = st;
  f.detectedNs = monotonicNs();
  return f;
}

// What the measured phase found.
struct Measured {
  std::vector<harness::SizeResult> rows;  // without fault mode: one per size, every rank's slowest
  std::optional<he::Fault> fault;
  uint64_t totalErrors = 0;
  uint64_t iteration = 0;  // iterations run
  bool windowExpired = false;
};

// One size's warm-up and timed iterations; the timed iterations' seconds, summed.
// Stops at a fault or, in fault mode, at the window's end (m says which).
double timeSize(const Config& c, he::Engine& engine, size_t size, uint64_t windowEnd,
                uint64_t& sizeErrors, Measured& m) {
  double timed = 0;
  const int total = c.options.warmup + c.options.iters;
  for (int i = 0; i < total; ++i) {
    he::IterationResult r = engine.run(size, m.iteration++, {.barrier = !c.faultMode});
    sizeErrors += r.errors;
    if (r.fault) {
      m.fault = std::move(r.fault);
      break;
    }
    if (i >= c.options.warmup) {
      timed += r.seconds;
    }
    if (c.faultMode && monotonicNs() > windowEnd) {
      m.windowExpired = true;
      break;
    }
  }
  return timed;
}

// Without fault mode: every rank's mean and errors for one size, gathered out of band;
// the row (the slowest rank's time, everybody's errors), which rank 0 prints.
void gatherRow(const RankState& s, he::RendezvousClient& oob, size_t size, double mean,
               uint64_t sizeErrors, Measured& m) {
  char mine[64];
  std::snprintf(mine, sizeof(mine), "%.9g %llu", mean, static_cast<unsigned long long>(sizeErrors));
  Result<std::vector<std::string>> all = oob.allGather(mine);
  if (!all.ok()) {
    m.fault = outOfBandFault("gather of results (out of band)", all.status());
    return;
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
  m.rows.push_back(harness::makeSizeResult({.pattern = s.c.pattern,
                                            .nranks = s.world,
                                            .bytes = size,
                                            .seconds = slowest,
                                            .errors = errors}));
  if (s.rank == 0) {
    std::printf("%s\n", harness::tableRow(s.c.pattern, m.rows.back()).c_str());
    std::fflush(stdout);
  }
}

// Every size, once; in fault mode again and again until a fault or the window's end.
Measured measure(RankState& s, he::Engine& engine, he::RendezvousClient& oob, uint64_t startNs) {
  const Config& c = s.c;
  const uint64_t windowEnd = startNs + static_cast<uint64_t>(c.faultWindowMs) * 1000000ull;
  Measured m;
  for (int cycle = 0; !m.fault && !m.windowExpired; ++cycle) {
    for (size_t size : c.sizes) {
      uint64_t sizeErrors = 0;
      const double timed = timeSize(c, engine, size, windowEnd, sizeErrors, m);
      m.totalErrors += sizeErrors;
      if (m.fault || m.windowExpired) {
        break;
      }
      const double mean = timed / c.options.iters;
      if (cycle == 0) {
        s.result["sizes"].push_back(json{{"bytes", he::effectiveBytes(c.pattern, s.world, size)},
                                         {"seconds", mean},
                                         {"errors", sizeErrors}});
      }
      if (!c.faultMode) {
        gatherRow(s, oob, size, mean, sizeErrors, m);
        if (m.fault) {
          break;
        }
      }
    }
    if (!c.faultMode) {
      break;
    }
  }
  return m;
}

// After the measured phase: the fault reported and the others told, or rank 0's
// summary (and, started by hand, its report). The rank's exit status.
int endRun(RankState& s, const Measured& m, const json& rowsJson, he::Engine& engine,
           he::RendezvousClient& oob) {
  const Config& c = s.c;
  if (m.fault) {
    s.reportFault(*m.fault, ("in iteration " + std::to_string(m.fault->iteration) + " (" +
                             std::to_string(m.fault->bytes) + " B)")
                                .c_str());
    // NCCL's abort: close every comm with whatever is outstanding; tell the others.
    engine.close();
    oob.abort("rank " + std::to_string(s.rank) + ": " + m.fault->describe());
    return tools::kExitFault;
  }
  if (s.rank == 0 && !c.faultMode) {
    printSummary(m.rows);
    if (!s.launched()) {
      printConformance(s.result["conformance_notes"]);
    }
    if (!s.launched() && !c.options.jsonPath.empty()) {
      const json report = reportJson(c, RunReport{.nranks = s.world,
                                                  .transport = s.result["transport"],
                                                  .rows = rowsJson,
                                                  .conformance = s.result["conformance_notes"],
                                                  .ok = m.totalErrors == 0});
      tools::writeFileAtomically(c.options.jsonPath, report.dump(2) + "\n");
    }
  }
  if (!c.faultMode) {
    (void)oob.finish();
  }
  engine.close();
  if (c.faultMode) {
    std::fprintf(stderr, "# rank %d: no fault detected within %lld ms\n", s.rank,
                 static_cast<long long>(c.faultWindowMs));
    return tools::kExitFault;
  }
  return m.totalErrors > 0 ? tools::kExitDataErrors : tools::kExitOk;
}

// Set up, the measured phase, the end: the rank's exit status, its result filled. Rank 0
// stops its rendezvous server after the measured phase.
int runConnected(RankState& s, transport::Transport& transport, OutOfBand& outOfBand) {
  he::RendezvousClient& oob = *outOfBand.client;
  const Config& c = s.c;
  he::Engine engine(transport, oob, engineOptions(s));
  if (std::optional<he::Fault> f = engine.setup(c.maxBytes)) {
    s.reportFault(*f, "during setup");
    oob.abort("rank " + std::to_string(s.rank) + " setup failed: " + f->describe());
    engine.close();
    return tools::kExitFault;
  }
  s.result["setup_ok"] = true;
  s.result["transport"] = transportJson(c, transport, engine);
  s.result["transport_text"] = describeTransport(c, transport, engine);

  if (Status st = oob.barrier(); !st.ok()) {
    s.reportFault(outOfBandFault("barrier (out of band)", st), "before the measured phase");
    engine.close();
    return tools::kExitFault;
  }
  const uint64_t startNs = monotonicNs();
  s.result["start_ns"] = startNs;
  if (s.rank == 0) {
    if (s.launch.startFd) {
      harness::signalStart(*s.launch.startFd, startNs);
    }
    printRunHeader(c, s.world, describeTransport(c, transport, engine), engine);
    std::fflush(stdout);
  }

  const Measured m = measure(s, engine, oob, startNs);
  s.result["errors"] = m.totalErrors;
  s.result["conformance_notes"] = conformanceNotes(engine.conformance());
  s.result["window_expired"] = m.windowExpired;
  s.result["iterations_run"] = m.iteration;
  json rowsJson = json::array();
  for (const auto& r : m.rows) {
    rowsJson.push_back(rowJson(c.pattern, r));
  }
  s.result["rows"] = rowsJson;
  const int code = endRun(s, m, rowsJson, engine, oob);
  if (outOfBand.server) {
    outOfBand.server->stop();
  }
  return code;
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
  resilient::log::setRank(*rankR);
  RankState s{.c = c,
              .rank = *rankR,
              .world = *worldR,
              .launch = harness::readLaunchedRank(env, kLaunchEnvNames),
              .resultDir = env.get(kEnvDir),
              .result = json()};
  Result<int> portR = envInt(env, "MASTER_PORT");
  if (s.world < 2 || s.rank >= s.world || !portR.ok() || *portR > 65535) {
    std::fprintf(stderr,
                 "resilient-nettest: rank mode needs RANK < WORLD_SIZE (>= 2) and MASTER_PORT\n");
    return tools::kExitUsage;
  }
  if (c.pattern == he::Pattern::kPingPong && s.world != 2) {
    std::fprintf(stderr, "resilient-nettest: pingpong needs WORLD_SIZE=2\n");
    return tools::kExitUsage;
  }

  s.result = json{{"rank", s.rank},        {"pid", static_cast<int>(::getpid())},
                  {"setup_ok", false},     {"fault", nullptr},
                  {"errors", 0},           {"sizes", json::array()},
                  {"rows", json::array()}, {"window_expired", false}};
  std::unique_ptr<transport::Transport> transport = loadTransport(s);
  if (!transport) {
    return s.finish(tools::kExitUsage);
  }
  OutOfBand oob = joinOutOfBand(s, static_cast<uint16_t>(*portR));
  if (!oob.client) {
    return s.finish(tools::kExitUsage);
  }
  return s.finish(runConnected(s, *transport, oob));
}

}  // namespace resilient::nettest
