// resilient-nettest's configuration: the command line (CLI11) and what it
// means once checked (Config), the same for the launcher and every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "hostengine/engine.h"
#include "hostengine/pattern.h"
#include "tools/harness/launcher.h"

namespace resilient::nettest {

namespace he = resilient::hostengine;

// The command line as given.
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

// The command line checked and parsed.
struct Config {
  Options options;
  he::Pattern pattern = he::Pattern::kAllReduce;
  std::vector<size_t> sizes;
  size_t maxBytes = 0;
  int64_t timeoutMs = 30000;
  std::vector<harness::TimedSignal> kills;
  std::vector<harness::TimedSignal> stops;
  std::vector<harness::RankFault> faults;
  bool faultMode = false;
  int64_t faultWindowMs = 0;  // fault mode: how long ranks keep running after the start
  size_t chunkBytes = he::kDefaultChunkBytes;
  size_t minPieceBytes = he::kDefaultMinPieceBytes;
};

// The description the tool's CLI::App is built with (--help).
extern const char* const kDescription;
// The tool's options, each bound to its field of `o`.
void addOptions(CLI::App& app, Options& o);

Result<Config> makeConfig(const Options& o);

}  // namespace resilient::nettest
