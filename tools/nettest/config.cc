#include "tools/nettest/config.h"

#include <algorithm>
#include <optional>

#include "hostengine/rendezvous.h"
#include "plugin/transport/raw/raw_transport.h"
#include "tools/harness/report.h"

namespace resilient::nettest {

const char* const kDescription =
    "resilient-nettest: runs ping-pong, send/recv, ring all-reduce or all-to-all among N "
    "ranks through any NCCL net plugin (loaded as NCCL loads it) on host buffers, checks every "
    "byte and prints nccl-tests style tables. Launches the ranks itself unless RANK and "
    "WORLD_SIZE are set. Host engine: test infrastructure, not NCCL.";

void addOptions(CLI::App& app, Options& o) {
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
}

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
  if (o.rawSockets < 1 || o.rawSockets > transport::raw::kRawTcpMaxSockets) {
    return resilient::invalidUsage("--raw-sockets must be 1.." +
                                   std::to_string(transport::raw::kRawTcpMaxSockets));
  }
  Result<size_t> minBytes = harness::parseSize(o.minBytes);
  Result<size_t> maxBytes = harness::parseSize(o.maxBytes);
  Result<size_t> chunk = harness::parseSize(o.chunk);
  Result<size_t> minPiece = harness::parseSize(o.minPiece);
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
  Result<std::vector<size_t>> sizes = harness::sizeSweep(*minBytes, *maxBytes, o.factor);
  if (!sizes.ok()) {
    return sizes.status();
  }
  c.sizes = *sizes;
  c.maxBytes = *maxBytes;
  int64_t latest = 0;
  for (const std::string& k : o.kills) {
    Result<harness::TimedSignal> s = harness::parseTimedSignal(k);
    if (!s.ok()) {
      return Status(resilient::invalidUsage("--kill: " + s.status().message()));
    }
    c.kills.push_back(*s);
    latest = std::max(latest, s->atMs);
  }
  for (const std::string& k : o.stops) {
    Result<harness::TimedSignal> s = harness::parseTimedSignal(k);
    if (!s.ok()) {
      return Status(resilient::invalidUsage("--stop: " + s.status().message()));
    }
    c.stops.push_back(*s);
    latest = std::max(latest, s->atMs);
  }
  for (const std::string& f : o.faults) {
    Result<harness::RankFault> s = harness::parseRankFault(f);
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

}  // namespace resilient::nettest
