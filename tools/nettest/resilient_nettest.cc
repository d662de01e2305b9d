// resilient-nettest: conformance, performance and chaos tool for NCCL net
// plugins, on the host engine (no GPU). It loads any net plugin .so as NCCL
// does, runs ping-pong, send/recv, ring all-reduce or all-to-all among N
// ranks (processes), checks every byte, and prints a table in the spirit of
// nccl-tests. Without RANK/WORLD_SIZE in the environment it launches the N
// ranks itself (and applies --kill/--stop/--fault); with them it is that one
// rank. --raw-tcp runs the same patterns over plain TCP sockets of our own,
// the physical baseline. The host engine is test infrastructure, not NCCL.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/file_descriptor.h"
#include "common/log.h"
#include "common/socket_address.h"
#include "hostengine/data.h"
#include "hostengine/engine.h"
#include "hostengine/launcher.h"
#include "hostengine/pattern.h"
#include "hostengine/raw_tcp_transport.h"
#include "hostengine/rendezvous.h"
#include "hostengine/report.h"
#include "hostengine/socket_io.h"
#include "hostengine/transport_choice.h"
#include "plugin/transport/external/loader.h"

extern char** environ;

namespace {

namespace he = resilient::hostengine;
using nlohmann::json;
using resilient::FileDescriptor;
using resilient::monotonicNs;
using resilient::Result;
using resilient::SocketAddress;
using resilient::Status;

// Variables between the launcher and its ranks.
constexpr const char* kEnvToken = "RESILIENT_NETTEST_TOKEN";
constexpr const char* kEnvDir = "RESILIENT_NETTEST_DIR";
constexpr const char* kEnvListenFd = "RESILIENT_NETTEST_LISTEN_FD";
constexpr const char* kEnvStartFd = "RESILIENT_NETTEST_START_FD";
constexpr const char* kEnvFault = "NCCL_RESILIENT_FAULT";

constexpr int kExitOk = 0;
constexpr int kExitDataErrors = 1;
constexpr int kExitUsage = 2;
constexpr int kExitFault = 3;

// The environment, read once in main before any thread exists.
class Environment {
 public:
  static Environment snapshot() {
    Environment env;
    for (auto& [name, value] : he::currentEnvironment()) {
      env.vars_.emplace(std::move(name), std::move(value));
    }
    return env;
  }
  std::optional<std::string> get(const std::string& name) const {
    auto it = vars_.find(name);
    if (it == vars_.end()) {
      return std::nullopt;
    }
    return it->second;
  }
  std::string get(const std::string& name, const std::string& fallback) const {
    return get(name).value_or(fallback);
  }
  he::EnvironmentList list() const { return {vars_.begin(), vars_.end()}; }

 private:
  std::map<std::string, std::string> vars_;
};

struct Options {
  std::string plugin;
  int ranks = 2;
  std::string pattern = "allreduce";
  std::string minBytes = "8";
  std::string maxBytes = "64M";
  uint64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string jsonPath;
  bool rawTcp = false;
  int rawSockets = 1;
  bool pinCpus = false;
  std::vector<std::string> kills;
  std::vector<std::string> stops;
  std::vector<std::string> faults;
  int64_t faultWindowMs = 0;
  double timeoutSec = 30;
  int depth = 8;
  std::string chunk = "512K";
  int multiRecv = he::kMaxPieces;
  std::string minPiece = "128K";
  int device = 0;
};

struct Config {
  Options options;
  he::Pattern pattern = he::Pattern::kAllReduce;
  std::vector<size_t> sizes;
  size_t maxBytes = 0;
  int64_t timeoutMs = 30000;
  std::vector<he::TimedSignal> kills;
  std::vector<he::TimedSignal> stops;
  std::vector<he::RankFault> faults;
  bool faultMode = false;
  int64_t faultWindowMs = 0;  // fault mode: how long ranks keep running after the start
  size_t chunkBytes = he::kDefaultChunkBytes;
  size_t minPieceBytes = he::kDefaultMinPieceBytes;
};

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

// ---------------------------------------------------------------------------
// Validation of the command line

Result<Config> makeConfig(const Options& o) {
  Config c;
  c.options = o;
  std::optional<he::Pattern> pattern = he::parsePattern(o.pattern);
  if (!pattern) {
    return resilient::invalidUsage("unknown pattern '" + o.pattern +
                                   "' (pingpong, sendrecv, allreduce, alltoall)");
  }
  c.pattern = *pattern;
  if (!o.rawTcp && o.plugin.empty()) {
    return resilient::invalidUsage("--plugin PATH is required (or --raw-tcp)");
  }
  if (o.ranks < 2 || o.ranks > static_cast<int>(he::kRendezvousMaxWorld)) {
    return resilient::invalidUsage("--ranks must be 2.." + std::to_string(he::kRendezvousMaxWorld));
  }
  if (c.pattern == he::Pattern::kPingPong && o.ranks != 2) {
    return resilient::invalidUsage("pingpong needs --ranks 2");
  }
  if (o.iters < 1 || o.warmup < 0) {
    return resilient::invalidUsage("-n must be >= 1 and -w >= 0");
  }
  if (!(o.timeoutSec > 0) || o.timeoutSec > 86400) {
    return resilient::invalidUsage("--timeout must be in (0, 86400] seconds");
  }
  c.timeoutMs = static_cast<int64_t>(o.timeoutSec * 1000);
  if (o.depth < 1 || o.depth > resilient::transport::kMaxRequests) {
    return resilient::invalidUsage("--depth must be 1..32 (NCCL_NET_MAX_REQUESTS)");
  }
  if (o.multiRecv < 1 || o.multiRecv > he::kMaxPieces) {
    return resilient::invalidUsage("--multi-recv must be 1.." + std::to_string(he::kMaxPieces));
  }
  if (o.rawSockets < 1 || o.rawSockets > he::kRawTcpMaxSockets) {
    return resilient::invalidUsage("--raw-sockets must be 1.." +
                                   std::to_string(he::kRawTcpMaxSockets));
  }
  Result<size_t> minBytes = he::parseSize(o.minBytes);
  Result<size_t> maxBytes = he::parseSize(o.maxBytes);
  Result<size_t> chunk = he::parseSize(o.chunk);
  Result<size_t> minPiece = he::parseSize(o.minPiece);
  for (const Result<size_t>* r : {&minBytes, &maxBytes, &chunk, &minPiece}) {
    if (!r->ok()) {
      return r->status();
    }
  }
  if (*chunk < 4 || *chunk > (size_t{1} << 30)) {
    return resilient::invalidUsage("--chunk must be 4 B .. 1 GiB");
  }
  c.chunkBytes = *chunk;
  c.minPieceBytes = *minPiece;
  Result<std::vector<size_t>> sizes = he::sizeSweep(*minBytes, *maxBytes, o.factor);
  if (!sizes.ok()) {
    return sizes.status();
  }
  c.sizes = *sizes;
  c.maxBytes = *maxBytes;
  int64_t latest = 0;
  for (const std::string& k : o.kills) {
    Result<he::TimedSignal> s = he::parseTimedSignal(k);
    if (!s.ok()) {
      return Status(resilient::invalidUsage("--kill: " + s.status().message()));
    }
    c.kills.push_back(*s);
    latest = std::max(latest, s->atMs);
  }
  for (const std::string& k : o.stops) {
    Result<he::TimedSignal> s = he::parseTimedSignal(k);
    if (!s.ok()) {
      return Status(resilient::invalidUsage("--stop: " + s.status().message()));
    }
    c.stops.push_back(*s);
    latest = std::max(latest, s->atMs);
  }
  for (const std::string& f : o.faults) {
    Result<he::RankFault> s = he::parseRankFault(f);
    if (!s.ok()) {
      return Status(resilient::invalidUsage("--fault: " + s.status().message()));
    }
    c.faults.push_back(*s);
  }
  for (const auto& s : c.kills) {
    if (s.rank >= o.ranks) {
      return resilient::invalidUsage("--kill names rank " + std::to_string(s.rank) + " of only " +
                                     std::to_string(o.ranks));
    }
  }
  for (const auto& s : c.stops) {
    if (s.rank >= o.ranks) {
      return resilient::invalidUsage("--stop names rank " + std::to_string(s.rank) + " of only " +
                                     std::to_string(o.ranks));
    }
  }
  for (const auto& f : c.faults) {
    if (f.rank >= o.ranks) {
      return resilient::invalidUsage("--fault names rank " + std::to_string(f.rank) + " of only " +
                                     std::to_string(o.ranks));
    }
  }
  if (o.rawTcp && !c.faults.empty()) {
    return resilient::invalidUsage(
        "--fault sets NCCL_RESILIENT_FAULT, which only a plugin reads; not with --raw-tcp");
  }
  c.faultMode = !c.kills.empty() || !c.stops.empty() || !c.faults.empty();
  c.faultWindowMs = latest + c.timeoutMs;
  if (o.faultWindowMs < 0) {
    return resilient::invalidUsage("--fault-window must be >= 0 ms");
  }
  if (o.faultWindowMs > 0) {  // faults injected from outside (links, firewalls, ...)
    c.faultMode = true;
    c.faultWindowMs = std::max(c.faultWindowMs - c.timeoutMs, o.faultWindowMs);
  }
  return c;
}

// ---------------------------------------------------------------------------
// One rank

struct SizeLocal {
  size_t bytes = 0;
  double seconds = 0;  // mean of the timed iterations on this rank
  uint64_t errors = 0;
};

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

json rowJson(he::Pattern pattern, const he::SizeResult& r) {
  return json{{"bytes", r.bytes},    {"count", r.count},      {"type", he::elementType(pattern)},
              {"time_us", r.timeUs}, {"algbw_gbps", r.algBw}, {"busbw_gbps", r.busBw},
              {"errors", r.errors}};
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
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

json reportJson(const Config& c, int nranks, const json& transport, const json& rows,
                const json& faults, const json& injections, bool ok) {
  double sum = 0;
  uint64_t errors = 0;
  for (const json& r : rows) {
    sum += r["busbw_gbps"].get<double>();
    errors += r["errors"].get<uint64_t>();
  }
  return json{{"tool", "resilient-nettest"},
              {"pattern", he::patternName(c.pattern)},
              {"ranks", nranks},
              {"iterations", c.options.iters},
              {"warmup", c.options.warmup},
              {"transport", transport},
              {"results", rows},
              {"avg_busbw_gbps", rows.empty() ? 0.0 : sum / static_cast<double>(rows.size())},
              {"errors", errors},
              {"faults", faults},
              {"injections", injections},
              {"ok", ok}};
}

void printSummary(const std::vector<he::SizeResult>& rows) {
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

Result<int> envInt(const Environment& env, const char* name) {
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

int runRank(const Config& c, const Environment& env) {
  Result<int> rankR = envInt(env, "RANK");
  Result<int> worldR = envInt(env, "WORLD_SIZE");
  if (!rankR.ok() || !worldR.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n",
                 (!rankR.ok() ? rankR : worldR).status().toString().c_str());
    return kExitUsage;
  }
  const int rank = *rankR;
  const int world = *worldR;
  resilient::log::setRank(rank);
  const std::optional<std::string> resultDir = env.get(kEnvDir);
  const bool launched = resultDir.has_value();
  uint64_t token = 0;
  if (std::optional<std::string> t = env.get(kEnvToken)) {
    token = std::strtoull(t->c_str(), nullptr, 16);
  }
  const std::string master = env.get("MASTER_ADDR", "127.0.0.1");
  Result<int> portR = envInt(env, "MASTER_PORT");
  if (world < 2 || rank >= world || !portR.ok() || *portR > 65535) {
    std::fprintf(stderr,
                 "resilient-nettest: rank mode needs RANK < WORLD_SIZE (>= 2) and MASTER_PORT\n");
    return kExitUsage;
  }
  if (c.pattern == he::Pattern::kPingPong && world != 2) {
    std::fprintf(stderr, "resilient-nettest: pingpong needs WORLD_SIZE=2\n");
    return kExitUsage;
  }

  json result{{"rank", rank},          {"pid", static_cast<int>(::getpid())},
              {"setup_ok", false},     {"fault", nullptr},
              {"errors", 0},           {"sizes", json::array()},
              {"rows", json::array()}, {"window_expired", false}};
  auto finish = [&](int code) {
    result["exit_code"] = code;
    if (resultDir) {
      writeFileAtomically(*resultDir + "/rank" + std::to_string(rank) + ".json", result.dump(1));
    } else if (c.faultMode && !c.options.jsonPath.empty()) {
      // A rank started by hand in fault mode: its own outcome (fault, peer, times).
      writeFileAtomically(c.options.jsonPath, result.dump(2) + "\n");
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
  he::RawTcpOptions raw;
  raw.bindHost = he::localAddressToward(master);
  raw.sockets = c.options.rawSockets;
  raw.token = token;
  raw.connectTimeoutMs = c.timeoutMs;
  auto opened = he::openTransport(
      c.options.rawTcp ? std::nullopt : std::optional<std::string>(c.options.plugin), raw);
  if (!opened.ok()) {
    std::fprintf(stderr, "# rank %d: cannot load the plugin: %s\n", rank,
                 opened.status().toString().c_str());
    result["load_error"] = opened.status().toString();
    return finish(kExitUsage);
  }
  std::unique_ptr<resilient::transport::Transport> transport = std::move(opened).value();

  // Out of band: rank 0 serves the rendezvous, everybody connects to it.
  std::unique_ptr<he::RendezvousServer> server;
  if (rank == 0) {
    Result<FileDescriptor> listenFd = resilient::invalidUsage("unset");
    if (std::optional<std::string> fd = env.get(kEnvListenFd)) {
      listenFd = FileDescriptor(std::atoi(fd->c_str()));
    } else {
      listenFd = he::listenOn(master, static_cast<uint16_t>(*portR), 1024);
    }
    Result<std::unique_ptr<he::RendezvousServer>> s =
        listenFd.ok() ? he::RendezvousServer::start(std::move(listenFd).value(),
                                                    static_cast<uint32_t>(world), token)
                      : Result<std::unique_ptr<he::RendezvousServer>>(listenFd.status());
    if (!s.ok()) {
      std::fprintf(stderr, "# rank 0: rendezvous server: %s\n", s.status().toString().c_str());
      return finish(kExitUsage);
    }
    server = std::move(s).value();
  }
  Result<SocketAddress> serverAddress =
      resilient::resolveAddress(master, static_cast<uint16_t>(*portR));
  Result<std::unique_ptr<he::RendezvousClient>> clientR =
      serverAddress.ok()
          ? he::RendezvousClient::connect(*serverAddress, static_cast<uint32_t>(rank),
                                          static_cast<uint32_t>(world), token, c.timeoutMs)
          : Result<std::unique_ptr<he::RendezvousClient>>(serverAddress.status());
  if (!clientR.ok()) {
    std::fprintf(stderr, "# rank %d: rendezvous: %s\n", rank, clientR.status().toString().c_str());
    return finish(kExitUsage);
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
    return finish(kExitFault);
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
    return finish(kExitFault);
  }
  const uint64_t startNs = monotonicNs();
  result["start_ns"] = startNs;
  if (rank == 0) {
    if (std::optional<std::string> fd = env.get(kEnvStartFd)) {
      const int startFd = std::atoi(fd->c_str());
      (void)!::write(startFd, &startNs, sizeof(startNs));
      ::close(startFd);
    }
    std::printf(
        "# resilient-nettest: host engine on host buffers (test infrastructure, not NCCL)\n");
    std::printf(
        "# %s on %d ranks, sizes %s .. %s (x%llu), %d iterations after %d warm-up, every "
        "byte checked\n",
        he::patternName(c.pattern), world, humanBytes(c.sizes.front()).c_str(),
        humanBytes(c.sizes.back()).c_str(), static_cast<unsigned long long>(c.options.factor),
        c.options.iters, c.options.warmup);
    std::printf("# transport: %s\n", describeTransport(c, *transport, engine).c_str());
    std::printf(
        "# pipeline: %d requests in flight per connection, chunks of %s, grouped receives "
        "of up to %d pieces (>= %s each)\n",
        engine.depth(), humanBytes(engine.chunkBytes()).c_str(), engine.piecesPerItem(),
        humanBytes(c.minPieceBytes).c_str());
    if (c.faultMode) {
      std::printf("# fault mode: ranks run until a fault is detected or %lld ms have passed\n",
                  static_cast<long long>(c.faultWindowMs));
    } else {
      std::printf("#\n%s\n", he::tableHeader(c.pattern).c_str());
    }
    std::fflush(stdout);
  }

  const uint64_t windowEnd = startNs + static_cast<uint64_t>(c.faultWindowMs) * 1000000ull;
  std::vector<he::SizeResult> rows;
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
        he::IterationResult r = engine.run(size, iteration++, !c.faultMode);
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
        rows.push_back(he::makeSizeResult(c.pattern, world, size, slowest, errors));
        if (rank == 0) {
          std::printf("%s\n", he::tableRow(c.pattern, rows.back()).c_str());
          std::fflush(stdout);
        }
      }
    }
    if (!c.faultMode) {
      break;
    }
  }
  result["errors"] = totalErrors;
  result["window_expired"] = windowExpired;
  result["iterations_run"] = iteration;
  json rowsJson = json::array();
  for (const auto& r : rows) {
    rowsJson.push_back(rowJson(c.pattern, r));
  }
  result["rows"] = rowsJson;

  int code = totalErrors > 0 ? kExitDataErrors : kExitOk;
  if (fault) {
    reportFault(*fault, ("in iteration " + std::to_string(fault->iteration) + " (" +
                         std::to_string(fault->bytes) + " B)")
                            .c_str());
    // NCCL's abort: close every comm with whatever is outstanding; tell the others.
    engine.close();
    oob.abort("rank " + std::to_string(rank) + ": " + fault->describe());
    code = kExitFault;
  } else {
    if (rank == 0 && !c.faultMode) {
      printSummary(rows);
      if (!launched && !c.options.jsonPath.empty()) {
        const json report = reportJson(c, world, result["transport"], rowsJson, json::array(),
                                       json::array(), totalErrors == 0);
        writeFileAtomically(c.options.jsonPath, report.dump(2) + "\n");
      }
    }
    if (!c.faultMode) {
      (void)oob.finish();
    }
    engine.close();
    if (c.faultMode) {
      std::fprintf(stderr, "# rank %d: no fault detected within %lld ms\n", rank,
                   static_cast<long long>(c.faultWindowMs));
      code = kExitFault;
    }
  }
  if (server) {
    server->stop();
  }
  return finish(code);
}

// ---------------------------------------------------------------------------
// The launcher

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

struct Survivor {
  int rank = 0;
  std::string outcome;  // "detected", "not detected", ...
  bool ok = false;
};

int runLauncher(const Config& c, const Environment& env, const std::vector<std::string>& argv) {
  const int n = c.options.ranks;
  const std::string master = env.get("MASTER_ADDR", "127.0.0.1");
  int port = 0;
  if (std::optional<std::string> p = env.get("MASTER_PORT")) {
    port = std::atoi(p->c_str());
  }
  std::string tmpl = env.get("TMPDIR", "/tmp") + "/resilient-nettest.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("resilient-nettest: mkdtemp");
    return kExitUsage;
  }
  const std::string dir = tmpl;
  Result<he::LocalLaunch> local = he::planLocalLaunch(
      master, static_cast<uint16_t>(port), n, argv, env.list(),
      {kEnvToken, kEnvListenFd, kEnvStartFd}, [&](int r) {
        he::EnvironmentList extra = {{kEnvDir, dir}};
        for (const he::RankFault& f : c.faults) {
          if (f.rank == r) {
            extra.emplace_back(kEnvFault, f.spec);
          }
        }
        return extra;
      });
  if (!local.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", local.status().toString().c_str());
    return kExitUsage;
  }
  he::LaunchPlan& plan = local->plan;
  for (const auto& k : c.kills) {
    plan.injections.push_back({k.rank, SIGKILL, k.atMs});
  }
  for (const auto& s : c.stops) {
    plan.injections.push_back({s.rank, SIGSTOP, s.atMs});
  }
  plan.startTimeoutMs = c.timeoutMs + 30000;
  plan.pinRanks = c.options.pinCpus;
  plan.runTimeoutMs = c.faultMode ? c.faultWindowMs + 15000 : 0;

  Result<he::LaunchOutcome> launched = he::launchRanks(plan);
  ::close(plan.startPipeRead);
  if (!launched.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", launched.status().toString().c_str());
    return kExitUsage;
  }
  const he::LaunchOutcome& outcome = *launched;

  std::vector<std::optional<json>> results(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const std::string path = dir + "/rank" + std::to_string(r) + ".json";
    results[static_cast<size_t>(r)] = readJsonFile(path);
    ::unlink(path.c_str());
  }
  ::rmdir(dir.c_str());

  std::vector<bool> victim(static_cast<size_t>(n), false);
  for (const auto& k : c.kills) {
    victim[static_cast<size_t>(k.rank)] = true;
  }
  for (const auto& s : c.stops) {
    victim[static_cast<size_t>(s.rank)] = true;
  }
  for (const auto& f : c.faults) {
    victim[static_cast<size_t>(f.rank)] = true;
  }
  // The earliest signal sent is the reference of the detection times.
  uint64_t injectedNs = 0;
  json injections = json::array();
  bool allInjected = true;
  for (const he::Injection& i : plan.injections) {
    const he::RankOutcome& target = outcome.ranks[static_cast<size_t>(i.rank)];
    const bool sent = target.injectedSignal == i.signal && target.injectedNs != 0;
    allInjected = allInjected && sent;
    json j{{"kind", i.signal == SIGKILL ? "kill" : "stop"},
           {"rank", i.rank},
           {"at_ms", i.atMs},
           {"sent", sent}};
    if (sent) {
      j["sent_after_start_ms"] = static_cast<double>(target.injectedNs - outcome.startNs) / 1e6;
      injectedNs = injectedNs == 0 ? target.injectedNs : std::min(injectedNs, target.injectedNs);
    }
    injections.push_back(j);
  }
  for (const he::RankFault& f : c.faults) {
    injections.push_back(json{{"kind", "fault"}, {"rank", f.rank}, {"spec", f.spec}});
  }

  json transport = json::object();
  for (const auto& r : results) {
    if (r && r->contains("transport")) {
      transport = (*r)["transport"];
      break;
    }
  }
  json rows = json::array();
  bool ok = true;
  json faults = json::array();

  if (!c.faultMode) {
    if (results[0] && (*results[0])["rows"].is_array()) {
      rows = (*results[0])["rows"];
    }
    for (int r = 0; r < n; ++r) {
      const he::RankOutcome& o = outcome.ranks[static_cast<size_t>(r)];
      const auto& res = results[static_cast<size_t>(r)];
      if (!o.exited || o.exitCode != 0) {
        ok = false;
        std::printf("# rank %d: %s%s\n", r, he::describeExit(o).c_str(),
                    res && !(*res)["fault"].is_null()
                        ? (": " + (*res)["fault"]["status"].get<std::string>()).c_str()
                        : "");
      }
      if (res && !(*res)["fault"].is_null()) {
        json f = (*res)["fault"];
        f["rank"] = r;
        f["outcome"] = "unexpected fault";
        faults.push_back(f);
      }
    }
    if (outcome.startTimedOut) {
      std::printf("# the ranks did not finish their setup within %lld ms\n",
                  static_cast<long long>(plan.startTimeoutMs));
      ok = false;
    }
  } else {
    // Per size: the slowest surviving rank, over the sizes every survivor completed.
    std::map<size_t, std::pair<double, uint64_t>> bySize;
    std::map<size_t, int> seen;
    int survivors = 0;
    for (int r = 0; r < n; ++r) {
      const auto& res = results[static_cast<size_t>(r)];
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
    std::vector<he::SizeResult> table;
    for (const auto& [bytes, v] : bySize) {
      if (seen[bytes] == survivors) {
        table.push_back(he::makeSizeResult(c.pattern, n, bytes, v.first, v.second));
        rows.push_back(rowJson(c.pattern, table.back()));
      }
    }
    if (!table.empty()) {
      std::printf("# sizes completed by every surviving rank before the fault:\n%s\n",
                  he::tableHeader(c.pattern).c_str());
      for (const auto& row : table) {
        std::printf("%s\n", he::tableRow(c.pattern, row).c_str());
      }
    }
    std::printf("#\n");
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
    std::printf("# %4s  %-14s %-12s %4s %12s %12s  %s\n", "rank", "outcome", "call", "peer",
                "detect(ms)", "in-iter(ms)", "status");
    int detected = 0;
    const double timeoutMs = static_cast<double>(c.timeoutMs);
    // A survivor that gave up on its own deadline closes its comms, and its
    // peers then see that close: what they see after it is not a detection
    // of the injected fault.
    uint64_t firstGiveUpNs = UINT64_MAX;
    for (int r = 0; r < n; ++r) {
      const auto& res = results[static_cast<size_t>(r)];
      if (!victim[static_cast<size_t>(r)] && res && !(*res)["fault"].is_null() &&
          (*res)["fault"]["timed_out"].get<bool>()) {
        firstGiveUpNs = std::min(firstGiveUpNs, (*res)["fault"]["detected_ns"].get<uint64_t>());
      }
    }
    for (int r = 0; r < n; ++r) {
      const he::RankOutcome& o = outcome.ranks[static_cast<size_t>(r)];
      const auto& res = results[static_cast<size_t>(r)];
      const bool isVictim = victim[static_cast<size_t>(r)];
      std::string state;
      json f = res && !(*res)["fault"].is_null() ? (*res)["fault"] : json();
      double sinceInjection = -1;
      bool good = false;
      if (f.is_null()) {
        if (isVictim) {
          state = o.injectedSignal == SIGSTOP ? std::string("stopped (injected)")
                  : o.injectedSignal != 0     ? he::describeExit(o) + " (injected)"
                                              : he::describeExit(o);
          good = true;
        } else if (!res) {
          state = "no result (" + he::describeExit(o) + ")";
        } else if ((*res)["window_expired"].get<bool>()) {
          state = "not detected";
        } else {
          state = "no fault";
        }
      } else {
        const uint64_t at = f["detected_ns"].get<uint64_t>();
        if (injectedNs != 0 && at >= injectedNs) {
          sinceInjection = static_cast<double>(at - injectedNs) / 1e6;
        }
        if (f["timed_out"].get<bool>()) {
          state = "not detected";  // our deadline, not the transport's error
        } else if (injectedNs != 0 && at < injectedNs) {
          state = "early fault";
        } else if (sinceInjection > timeoutMs) {
          state = "late";
        } else if (at >= firstGiveUpNs) {
          state = "after a timeout";
        } else {
          state = isVictim ? "detected (victim)" : "detected";
          good = true;
        }
      }
      if (res && (*res)["errors"].get<uint64_t>() > 0) {
        state += ", data errors";
        good = false;
      }
      if (!isVictim) {
        detected += good ? 1 : 0;
        ok = ok && good;
      }
      char detect[32] = "-";
      char inIter[32] = "-";
      if (sinceInjection >= 0) {
        std::snprintf(detect, sizeof(detect), "%.3f", sinceInjection);
      }
      if (!f.is_null()) {
        std::snprintf(inIter, sizeof(inIter), "%.3f", f["since_iteration_start_ms"].get<double>());
      }
      std::printf("  %4d  %-14s %-12s %4s %12s %12s  %s\n", r, state.c_str(),
                  f.is_null() ? "-" : f["call"].get<std::string>().c_str(),
                  f.is_null() || f["peer"].get<int>() < 0
                      ? "-"
                      : std::to_string(f["peer"].get<int>()).c_str(),
                  detect, inIter, f.is_null() ? "" : f["status"].get<std::string>().c_str());
      if (!f.is_null() && !f["plugin_warning"].get<std::string>().empty()) {
        std::printf("  %4s  plugin: %s\n", "", f["plugin_warning"].get<std::string>().c_str());
      }
      json entry = f.is_null() ? json::object() : f;
      entry["rank"] = r;
      entry["outcome"] = state;
      entry["victim"] = isVictim;
      entry["exit"] = he::describeExit(o);
      if (sinceInjection >= 0) {
        entry["since_injection_ms"] = sinceInjection;
      }
      faults.push_back(entry);
    }
    if (!allInjected || !outcome.started) {
      ok = false;
    }
    std::printf("# %d of %d surviving ranks detected the fault within %g s: %s\n", detected,
                survivors, c.options.timeoutSec, ok ? "OK" : "FAILED");
  }
  if (!c.options.jsonPath.empty()) {
    const json report = reportJson(c, n, transport, rows, faults, injections, ok);
    writeFileAtomically(c.options.jsonPath, report.dump(2) + "\n");
  }
  std::fflush(stdout);
  if (ok) {
    return kExitOk;
  }
  bool dataErrors = false;
  for (const json& r : rows) {
    dataErrors = dataErrors || r["errors"].get<uint64_t>() > 0;
  }
  return dataErrors ? kExitDataErrors : kExitFault;
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{
      "resilient-nettest: runs ping-pong, send/recv, ring all-reduce or all-to-all among N "
      "ranks through any NCCL net plugin (loaded as NCCL loads it) on host buffers, checks every "
      "byte and prints nccl-tests style tables. Launches the ranks itself unless RANK and "
      "WORLD_SIZE are set. Host engine: test infrastructure, not NCCL."};
  app.add_option("--plugin", o.plugin, "net plugin: a path, a library name or a plugin name");
  app.add_option("--ranks", o.ranks, "number of ranks to launch")->capture_default_str();
  app.add_option("--pattern", o.pattern, "pingpong | sendrecv | allreduce | alltoall")
      ->capture_default_str();
  app.add_option("-b,--minbytes", o.minBytes, "smallest size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o.maxBytes, "largest size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations per size (also checked)")
      ->capture_default_str();
  app.add_option("--json", o.jsonPath, "also write the results as JSON to this file");
  app.add_flag("--raw-tcp", o.rawTcp, "plain TCP sockets of our own instead of a plugin");
  app.add_flag("--pin-cpus", o.pinCpus,
               "run rank r on CPU r (modulo the CPUs this process may use)");
  app.add_option("--raw-sockets", o.rawSockets, "--raw-tcp: TCP sockets per connection")
      ->capture_default_str();
  app.add_option("--kill", o.kills, "RANK@MS: SIGKILL that rank MS ms into the measured phase");
  app.add_option("--stop", o.stops, "RANK@MS: SIGSTOP that rank MS ms into the measured phase");
  app.add_option("--fault", o.faults, "RANK:SPEC: NCCL_RESILIENT_FAULT=SPEC for that rank only");
  app.add_option("--fault-window", o.faultWindowMs,
                 "MS: fault mode for faults injected from outside (a cut link, a firewall): run "
                 "until a fault is detected or MS ms have passed; in rank mode --json then "
                 "writes this rank's outcome");
  app.add_option("--timeout", o.timeoutSec,
                 "seconds: connection setup, one iteration, and fault detection")
      ->capture_default_str();
  app.add_option("--depth", o.depth, "receive requests in flight per connection (<= 32)")
      ->capture_default_str();
  app.add_option("--chunk", o.chunk, "largest message of a pipelined transfer")
      ->capture_default_str();
  app.add_option("--multi-recv", o.multiRecv,
                 "largest n of a grouped irecv (bounded by the plugin's maxRecvs; 1: off)")
      ->capture_default_str();
  app.add_option("--min-piece", o.minPiece, "smallest piece of a grouped receive")
      ->capture_default_str();
  app.add_option("--device", o.device, "plugin device index")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  Result<Config> config = makeConfig(o);
  if (!config.ok()) {
    std::fprintf(stderr, "resilient-nettest: %s\n", config.status().message().c_str());
    return kExitUsage;
  }
  const Environment env = Environment::snapshot();
  if (std::optional<std::string> level = env.get("NCCL_DEBUG")) {
    if (auto parsed = resilient::log::parseLevel(*level)) {
      unsigned long mask = ~0ul;
      if (std::optional<std::string> subsys = env.get("NCCL_DEBUG_SUBSYS")) {
        mask = resilient::log::parseSubsystems(*subsys).value_or(~0ul);
      }
      resilient::log::configure(*parsed, mask);
    }
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);
  if (env.get("RANK") && env.get("WORLD_SIZE")) {
    return runRank(*config, env);
  }
  std::vector<std::string> args(argv, argv + argc);
  return runLauncher(*config, env, args);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-nettest: %s\n", e.what());
    return kExitUsage;
  }
}
