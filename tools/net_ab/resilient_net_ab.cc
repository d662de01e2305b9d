// resilient-net-ab: an A/B comparison of transports on the host engine, for
// differences of a percent on a machine whose speed drifts by more.
//
// Two ranks (processes) load every transport named by --transport (a net
// plugin as NCCL loads it, or "raw": our plain TCP pump) and set up one
// engine per transport, all connected at once. Per size, every transport
// runs -w warm-up iterations, then --blocks blocks (more with --size-bytes);
// in a block each transport runs -n iterations back to back, in an order
// drawn at random per block (--seed; both ranks draw alike), so that no
// transport always follows the same one. The slowest rank's mean time per
// iteration of each transport in each block is recorded, so two transports
// are compared block by block (moments apart, in the same processes)
// instead of run against run. Every byte is checked, as in
// resilient-nettest. Two engines of the very same plugin differ by several
// percent for as long as their connections live when the kernel autotunes
// the socket buffers; fixed buffers (NCCL_RESILIENT_SOCKET_BUFFER_BYTES,
// --raw-socket-buffer) make them alike.
// Without RANK/WORLD_SIZE it launches the two ranks itself; rank 0 prints
// the table and writes --json.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "hostengine/engine.h"
#include "hostengine/pattern.h"
#include "hostengine/rendezvous.h"
#include "plugin/transport/raw/raw_transport.h"
#include "tools/common/host_tool.h"
#include "tools/harness/launched_rank.h"
#include "tools/harness/launcher.h"
#include "tools/harness/report.h"
#include "tools/harness/transport_choice.h"

namespace harness = resilient::harness;
namespace he = resilient::hostengine;
namespace raw = resilient::transport::raw;
using json = nlohmann::json;
using resilient::Result;

namespace {

using resilient::tools::kExitDataErrors;
using resilient::tools::kExitFault;
using resilient::tools::kExitOk;
using resilient::tools::kExitUsage;
constexpr const char* kEnvListenFd = "RESILIENT_AB_LISTEN_FD";
constexpr const char* kEnvStartFd = "RESILIENT_AB_START_FD";
constexpr const char* kEnvToken = "RESILIENT_AB_TOKEN";
constexpr harness::LaunchEnvNames kLaunchEnvNames{
    .token = kEnvToken, .listenFd = kEnvListenFd, .startFd = kEnvStartFd};
constexpr int kRanks = 2;

struct Options {
  std::vector<std::string> transports;
  std::string pattern = "sendrecv";
  std::string minBytes = "1M";
  std::string maxBytes = "64M";
  uint64_t factor = 4;
  int iters = 20;
  int warmup = 5;
  int blocks = 10;
  std::string sizeBytes;  // at least this many bytes per transport and size: more blocks
  uint64_t seed = 1;
  int multiRecv = he::kMaxPieces;
  int rawSockets = 1;
  int rawSocketBuffer = 0;
  bool pinCpus = false;
  double timeoutSec = 30;
  std::string jsonPath;
};

struct Config {
  Options options;
  he::Pattern pattern = he::Pattern::kSendRecv;
  std::vector<size_t> sizes;
  size_t maxBytes = 0;
  uint64_t bytesPerSize = 0;
  int64_t timeoutMs = 30000;
};

// Blocks of one size: --blocks, or more where the iterations of --size-bytes ask for them.
int blocksFor(const Config& c, size_t bytes) {
  const uint64_t perBlock = static_cast<uint64_t>(c.options.iters) * std::max<size_t>(bytes, 1);
  const uint64_t wanted = (c.bytesPerSize + perBlock - 1) / perBlock;
  return static_cast<int>(std::max<uint64_t>(static_cast<uint64_t>(c.options.blocks),
                                             std::min<uint64_t>(wanted, 1u << 20)));
}

Result<Config> makeConfig(const Options& o) {
  Config c;
  c.options = o;
  const std::optional<he::Pattern> pattern = he::parsePattern(o.pattern);
  if (!pattern || (*pattern != he::Pattern::kPingPong && *pattern != he::Pattern::kSendRecv)) {
    return resilient::invalidUsage("--pattern must be pingpong or sendrecv, not '" + o.pattern +
                                   "'");
  }
  c.pattern = *pattern;
  if (o.transports.size() < 2) {
    return resilient::invalidUsage(
        "name at least two transports to compare: --transport raw|PLUGIN, twice or more");
  }
  if (o.iters < 1 || o.warmup < 0 || o.blocks < 1) {
    return resilient::invalidUsage("-n and --blocks must be >= 1, -w >= 0");
  }
  if (o.multiRecv < 1 || o.multiRecv > he::kMaxPieces) {
    return resilient::invalidUsage("--multi-recv must be 1.." + std::to_string(he::kMaxPieces));
  }
  if (o.rawSocketBuffer < 0) {
    return resilient::invalidUsage("--raw-socket-buffer must be >= 0");
  }
  if (!o.sizeBytes.empty()) {
    Result<size_t> b = harness::parseSize(o.sizeBytes);
    if (!b.ok()) {
      return b.status();
    }
    c.bytesPerSize = *b;
  }
  if (o.rawSockets < 1 || o.rawSockets > raw::kRawTcpMaxSockets) {
    return resilient::invalidUsage("--raw-sockets must be 1.." +
                                   std::to_string(raw::kRawTcpMaxSockets));
  }
  if (!(o.timeoutSec > 0) || o.timeoutSec > 86400) {
    return resilient::invalidUsage("--timeout must be in (0, 86400] seconds");
  }
  c.timeoutMs = static_cast<int64_t>(o.timeoutSec * 1000);
  Result<size_t> minBytes = harness::parseSize(o.minBytes);
  Result<size_t> maxBytes = harness::parseSize(o.maxBytes);
  if (!minBytes.ok() || !maxBytes.ok()) {
    return (!minBytes.ok() ? minBytes : maxBytes).status();
  }
  Result<std::vector<size_t>> sizes = harness::sizeSweep(*minBytes, *maxBytes, o.factor);
  if (!sizes.ok()) {
    return sizes.status();
  }
  c.sizes = *sizes;
  c.maxBytes = *maxBytes;
  return c;
}

int envInt(const harness::Environment& env, const char* name, int fallback) {
  const std::optional<std::string> v = env.get(name);
  return v ? std::atoi(v->c_str()) : fallback;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One size: the slowest rank's seconds per iteration, [block][transport].
struct SizeBlocks {
  size_t bytes = 0;
  std::vector<std::vector<double>> seconds;
  uint64_t errors = 0;
};

void printSize(const Config& c, const SizeBlocks& s) {
  const size_t n = c.options.transports.size();
  std::printf("%12zu", s.bytes);
  std::vector<double> firstTimes;
  for (size_t t = 0; t < n; ++t) {
    std::vector<double> times;
    for (const auto& block : s.seconds) {
      times.push_back(block[t]);
    }
    const double us = median(times) * 1e6;
    const double busbw =
        static_cast<double>(s.bytes) / (us * 1e-6) / 1e9 * he::busFactor(c.pattern, kRanks);
    std::printf("  %10.2f %7.3f", us, busbw);
    if (t > 0) {
      // Bandwidth of t against t-1, paired block by block.
      std::vector<double> ratios;
      for (const auto& block : s.seconds) {
        ratios.push_back(block[t - 1] / block[t]);
      }
      std::printf(" %7.2f%%", 100 * median(ratios));
    }
  }
  std::printf("  %llu\n", static_cast<unsigned long long>(s.errors));
  std::fflush(stdout);
}

// Every transport of --transport, opened (a plugin as NCCL loads it, or "raw");
// nullopt after saying which could not be.
std::optional<std::vector<std::unique_ptr<resilient::transport::Transport>>> openTransports(
    const Config& c, int rank, const harness::LaunchedRank& launch) {
  std::vector<std::unique_ptr<resilient::transport::Transport>> transports;
  for (const std::string& spec : c.options.transports) {
    raw::RawTcpOptions raw;
    raw.bindHost = raw::localAddressToward(launch.master);
    raw.sockets = c.options.rawSockets;
    raw.socketBufferBytes = c.options.rawSocketBuffer;
    raw.token = launch.token;
    raw.connectTimeoutMs = c.timeoutMs;
    auto t = harness::openTransport(spec == "raw" ? std::nullopt : std::optional<std::string>(spec),
                                    raw);
    if (!t.ok()) {
      std::fprintf(stderr, "# rank %d: transport %s: %s\n", rank, spec.c_str(),
                   t.status().toString().c_str());
      return std::nullopt;
    }
    transports.push_back(std::move(t).value());
  }
  return transports;
}

// Out of band: rank 0 serves the rendezvous, both connect to it. The client is
// null when either failed (said on stderr).
struct OutOfBand {
  std::unique_ptr<he::RendezvousServer> server;
  std::unique_ptr<he::RendezvousClient> client;
};

OutOfBand joinOutOfBand(const Config& c, int rank, uint16_t port,
                        const harness::LaunchedRank& launch) {
  harness::RendezvousPlace place;
  place.master = launch.master;
  place.port = port;
  place.rank = rank;
  place.world = kRanks;
  place.token = launch.token;
  place.timeoutMs = c.timeoutMs;
  if (launch.listenFd.value_or(-1) >= 0) {
    place.inheritedListenFd = launch.listenFd;
  }
  place.serverSocket = launch.serverSocket;
  OutOfBand oob;
  if (rank == 0) {
    auto s = harness::serveRendezvous(place);
    if (!s.ok()) {
      std::fprintf(stderr, "# rank 0: rendezvous server: %s\n", s.status().toString().c_str());
      return oob;
    }
    oob.server = std::move(s).value();
  }
  auto client = harness::joinRendezvous(place);
  if (!client.ok()) {
    std::fprintf(stderr, "# rank %d: rendezvous: %s\n", rank, client.status().toString().c_str());
    return oob;
  }
  oob.client = std::move(client).value();
  return oob;
}

void printHeader(const Config& c) {
  std::printf("# resilient-net-ab: host engine on host buffers (test infrastructure, not NCCL)\n");
  std::printf(
      "# %s on 2 ranks; per size %d warm-up, then %d or more blocks of %d iterations "
      "per transport (order drawn per block), every byte checked\n",
      he::patternName(c.pattern), c.options.warmup, c.options.blocks, c.options.iters);
  std::printf(
      "# per transport: median over blocks of the slowest rank's time (us) and busbw "
      "(GB/s); from the second on, its bandwidth against the one before, paired per "
      "block (median)\n#\n%12s",
      "bytes");
  for (size_t t = 0; t < c.options.transports.size(); ++t) {
    const std::string& spec = c.options.transports[t];
    std::printf("  [%zu] %s%s", t, spec.substr(spec.rfind('/') + 1).c_str(),
                t > 0 ? " (us bw %)" : " (us bw)");
  }
  std::printf("  errors\n");
  std::fflush(stdout);
}

// One rank's engines, one per transport, over the same out-of-band client, and
// what runs them.
class AbRank {
 public:
  AbRank(const Config& c, int rank, he::RendezvousClient& oob) : c_(c), rank_(rank), oob_(oob) {}
  AbRank(const AbRank&) = delete;
  AbRank& operator=(const AbRank&) = delete;

  // False after saying which setup failed (the peer told, every engine closed).
  bool setUp(std::vector<std::unique_ptr<resilient::transport::Transport>>& transports,
             uint64_t token) {
    for (size_t t = 0; t < transports.size(); ++t) {
      he::EngineOptions eo;
      eo.rank = rank_;
      eo.nranks = kRanks;
      eo.pattern = c_.pattern;
      eo.multiRecv = c_.options.multiRecv;
      eo.timeoutMs = c_.timeoutMs;
      eo.commId = token ^ (0x61622d0000ull + t);
      engines_.push_back(std::make_unique<he::Engine>(*transports[t], oob_, eo));
      if (std::optional<he::Fault> f = engines_.back()->setup(c_.maxBytes)) {
        std::fprintf(stderr, "# rank %d: setup of %s: %s\n", rank_,
                     c_.options.transports[t].c_str(), f->describe().c_str());
        oob_.abort("setup failed");
        closeAll();
        return false;
      }
    }
    return true;
  }

  // One size: every transport's warm-up, then the blocks, each transport in an
  // order drawn from `random` (the same on both ranks). nullopt after a fault or
  // a failed gather (said; every engine closed).
  std::optional<SizeBlocks> measure(size_t bytes, std::mt19937_64& random,
                                    std::vector<size_t>& order) {
    const size_t n = engines_.size();
    SizeBlocks s;
    s.bytes = he::effectiveBytes(c_.pattern, kRanks, bytes);
    for (size_t t = 0; t < n; ++t) {
      double ignored = 0;
      if (!runIters(t, bytes, c_.options.warmup, &ignored, s)) {
        return std::nullopt;
      }
    }
    const int blocks = blocksFor(c_, bytes);
    for (int b = 0; b < blocks; ++b) {
      std::vector<double> mine(n, 0);
      std::shuffle(order.begin(), order.end(), random);
      for (size_t t : order) {
        double sum = 0;
        if (!runIters(t, bytes, c_.options.iters, &sum, s)) {
          return std::nullopt;
        }
        mine[t] = sum / c_.options.iters;
      }
      std::optional<std::vector<double>> slowest = slowestOf(mine);
      if (!slowest) {
        return std::nullopt;
      }
      s.seconds.push_back(*slowest);
    }
    return s;
  }

  void closeAll() {
    for (auto& e : engines_) {
      e->close();
    }
  }

  size_t transports() const { return engines_.size(); }

 private:
  // `count` iterations of transport t; their seconds added to *seconds, their
  // errors to s.
  bool runIters(size_t t, size_t bytes, int count, double* seconds, SizeBlocks& s) {
    for (int i = 0; i < count; ++i) {
      he::IterationResult r = engines_[t]->run(bytes, iteration_++, {.barrier = true});
      s.errors += r.errors;
      if (r.fault) {
        std::fprintf(stderr, "# rank %d: %s: %s\n", rank_, c_.options.transports[t].c_str(),
                     r.fault->describe().c_str());
        oob_.abort("fault");
        closeAll();
        return false;
      }
      *seconds += r.seconds;
    }
    return true;
  }

  // Both ranks' seconds per iteration of one block, gathered: the slower's, per
  // transport.
  std::optional<std::vector<double>> slowestOf(const std::vector<double>& mine) {
    std::string text;
    for (double v : mine) {
      char number[32];
      std::snprintf(number, sizeof number, "%.9g ", v);
      text += number;
    }
    auto all = oob_.allGather(text);
    if (!all.ok()) {
      std::fprintf(stderr, "# rank %d: gather: %s\n", rank_, all.status().toString().c_str());
      closeAll();
      return std::nullopt;
    }
    std::vector<double> slowest(mine.size(), 0);
    for (const std::string& part : *all) {
      const char* p = part.c_str();
      for (size_t t = 0; t < mine.size(); ++t) {
        char* end = nullptr;
        slowest[t] = std::max(slowest[t], std::strtod(p, &end));
        p = end;
      }
    }
    return slowest;
  }

  const Config& c_;
  const int rank_;
  he::RendezvousClient& oob_;
  std::vector<std::unique_ptr<he::Engine>> engines_;
  uint64_t iteration_ = 0;
};

void writeReport(const Config& c, const json& sizes, uint64_t totalErrors, bool gathered) {
  const json report{{"tool", "resilient-net-ab"},
                    {"pattern", he::patternName(c.pattern)},
                    {"ranks", kRanks},
                    {"iterations", c.options.iters},
                    {"warmup", c.options.warmup},
                    {"blocks", c.options.blocks},
                    {"seed", c.options.seed},
                    {"size_bytes", c.bytesPerSize},
                    {"raw_socket_buffer", c.options.rawSocketBuffer},
                    {"transports", c.options.transports},
                    {"sizes", sizes},
                    {"errors", totalErrors},
                    {"ok", gathered && totalErrors == 0}};
  resilient::tools::writeFileAtomically(c.options.jsonPath, report.dump(1) + "\n");
}

int runRank(const Config& c, const harness::Environment& env) {
  const int rank = envInt(env, "RANK", -1);
  const int world = envInt(env, "WORLD_SIZE", -1);
  const int port = envInt(env, "MASTER_PORT", -1);
  if (world != kRanks || rank < 0 || rank >= world || port <= 0 || port > 65535) {
    std::fprintf(stderr, "resilient-net-ab: rank mode needs RANK < WORLD_SIZE = 2, MASTER_PORT\n");
    return kExitUsage;
  }
  const harness::LaunchedRank launch = harness::readLaunchedRank(env, kLaunchEnvNames);
  auto transports = openTransports(c, rank, launch);
  if (!transports) {
    return kExitUsage;
  }
  OutOfBand outOfBand = joinOutOfBand(c, rank, static_cast<uint16_t>(port), launch);
  if (!outOfBand.client) {
    return kExitUsage;
  }
  he::RendezvousClient& oob = *outOfBand.client;
  AbRank ab(c, rank, oob);
  if (!ab.setUp(*transports, launch.token)) {
    return kExitFault;
  }
  if (rank == 0) {
    if (launch.startFd.value_or(-1) >= 0) {
      harness::signalStart(*launch.startFd, resilient::monotonicNs());
    }
    printHeader(c);
  }

  // Both ranks draw the same orders: same seed, same draws.
  std::mt19937_64 random(c.options.seed);
  std::vector<size_t> order(ab.transports());
  std::iota(order.begin(), order.end(), size_t{0});
  uint64_t totalErrors = 0;
  json sizes = json::array();
  for (size_t bytes : c.sizes) {
    std::optional<SizeBlocks> s = ab.measure(bytes, random, order);
    if (!s) {
      return kExitFault;
    }
    totalErrors += s->errors;
    if (rank == 0) {
      printSize(c, *s);
    }
    sizes.push_back(json{{"bytes", s->bytes}, {"seconds", s->seconds}, {"errors", s->errors}});
  }
  auto all = oob.allGather(std::to_string(totalErrors));
  if (all.ok()) {
    totalErrors = 0;
    for (const std::string& part : *all) {
      totalErrors += std::strtoull(part.c_str(), nullptr, 10);
    }
  }
  (void)oob.finish();
  ab.closeAll();
  if (outOfBand.server) {
    outOfBand.server->stop();
  }
  if (rank == 0 && !c.options.jsonPath.empty()) {
    writeReport(c, sizes, totalErrors, all.ok());
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(totalErrors),
                totalErrors == 0 ? "OK" : "FAILED");
  }
  return !all.ok() ? kExitFault : totalErrors > 0 ? kExitDataErrors : kExitOk;
}

int runLauncher(const Config& c, const std::vector<std::string>& argv) {
  harness::LocalLaunchOptions launch;
  launch.host = "127.0.0.1";
  launch.port = 0;  // any free port
  launch.nranks = kRanks;
  launch.argv = argv;
  launch.base = harness::currentEnvironment();
  launch.names = kLaunchEnvNames;
  Result<harness::LocalLaunch> local = harness::planLocalLaunch(launch);
  if (!local.ok()) {
    std::fprintf(stderr, "resilient-net-ab: %s\n", local.status().toString().c_str());
    return kExitUsage;
  }
  harness::LaunchPlan& plan = local->plan;
  plan.startTimeoutMs = c.timeoutMs * static_cast<int64_t>(c.options.transports.size()) + 30000;
  plan.pinRanks = c.options.pinCpus;
  Result<harness::LaunchOutcome> launched = harness::launchLocal(*local);
  if (!launched.ok()) {
    std::fprintf(stderr, "resilient-net-ab: %s\n", launched.status().toString().c_str());
    return kExitUsage;
  }
  int code = kExitOk;
  for (const harness::RankOutcome& o : launched->ranks) {
    if (!o.exited || o.exitCode != 0) {
      std::fprintf(stderr, "resilient-net-ab: rank %d: %s\n", o.rank,
                   harness::describeExit(o).c_str());
      // The worst: usage (a transport that does not load) over faults over data errors.
      const int mine = o.exited && (o.exitCode == kExitDataErrors || o.exitCode == kExitUsage)
                           ? o.exitCode
                           : kExitFault;
      code = code == kExitUsage || mine == kExitUsage ? kExitUsage : std::max(code, mine);
    }
  }
  if (launched->startTimedOut) {
    std::fprintf(stderr, "resilient-net-ab: the ranks did not finish their setup in time\n");
    code = kExitFault;
  }
  return code;
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{
      "resilient-net-ab: compares transports (net plugins loaded as NCCL loads them, or "
      "'raw', our plain TCP pump) on 2 ranks of the host engine, block by block in the same "
      "processes, so that differences of a percent show on a noisy machine. Host engine: test "
      "infrastructure, not NCCL."};
  app.add_option("--transport", o.transports,
                 "raw | a net plugin (path, library or plugin name); give two or more")
      ->required();
  app.add_option("--pattern", o.pattern, "pingpong | sendrecv")->capture_default_str();
  app.add_option("-b,--minbytes", o.minBytes, "smallest size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o.maxBytes, "largest size (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "iterations per transport per block")
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations per transport per size")
      ->capture_default_str();
  app.add_option("--blocks", o.blocks, "blocks per size (at least)")->capture_default_str();
  app.add_option("--size-bytes", o.sizeBytes,
                 "more blocks where needed for every transport to carry this many bytes per "
                 "size (K/M/G suffixes): small sizes get as much time as large ones");
  app.add_option("--seed", o.seed, "seed of the transports' order in each block")
      ->capture_default_str();
  app.add_option("--multi-recv", o.multiRecv, "largest n of a grouped irecv (1: off)")
      ->capture_default_str();
  app.add_option("--raw-sockets", o.rawSockets, "raw: TCP sockets per connection")
      ->capture_default_str();
  app.add_option("--raw-socket-buffer", o.rawSocketBuffer,
                 "raw: SO_SNDBUF/SO_RCVBUF of its sockets in bytes (0: autotuned); the plugins "
                 "take NCCL_RESILIENT_SOCKET_BUFFER_BYTES")
      ->capture_default_str();
  app.add_flag("--pin-cpus", o.pinCpus, "run rank r on CPU r (modulo the CPUs allowed)");
  app.add_option("--timeout", o.timeoutSec, "seconds: connection setup and one iteration")
      ->capture_default_str();
  app.add_option("--json", o.jsonPath, "write every block's times as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  Result<Config> config = makeConfig(o);
  if (!config.ok()) {
    std::fprintf(stderr, "resilient-net-ab: %s\n", config.status().message().c_str());
    return kExitUsage;
  }
  resilient::tools::ignoreSigpipe();
  const harness::Environment env = harness::Environment::snapshot();
  if (env.get("RANK") && env.get("WORLD_SIZE")) {
    return runRank(*config, env);
  }
  return runLauncher(*config, std::vector<std::string>(argv, argv + argc));
}

}  // namespace

int main(int argc, char** argv) {
  return resilient::tools::guardedMain("resilient-net-ab", run, argc, argv);
}
