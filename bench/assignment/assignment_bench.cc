// Rank assignment time at scale: a 16,384-rank job (hosts of 8 ranks, 32
// racks) loses 1,024 random ranks; for each policy, the time of the first
// assignment (a fresh policy: a Tree builds its layout then) and of the
// assignment after the failures, median of --reps repetitions with a
// different failure set each. Prints a table, then the same figures as JSON
// (--json FILE to save them). "first" and "after" are wall-clock medians;
// "cpu" is the median CPU time of the timed thread for "after" (on a loaded
// machine the wall time also counts the time the thread waited for a core).
// docs/performance.md quotes its output.
#include <stdlib.h>
#include <sys/utsname.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "resilient/restart/tree.hpp"

using namespace resilient::restart;

namespace {

struct Case {
  std::string name;
  std::function<RankAssignmentPtr()> make;  // a fresh policy (cold layout cache)
};

struct Row {
  std::string name;
  std::string policy;
  double firstMs = 0;  // median
  double afterMs = 0;  // median
  double afterMinMs = 0;
  double afterMaxMs = 0;
  double afterCpuMs = 0;  // median
  int worldSize = 0;      // after the failures, first repetition
  int activeWorldSize = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double threadCpuMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Timing {
  double wallMs;
  double cpuMs;  // this thread's CPU time: what the wall time is on an idle core
};

template <typename F>
Timing timeMs(F&& f) {
  const double c0 = threadCpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double, std::milli>(t1 - t0).count(), threadCpuMs() - c0};
}

std::vector<Case> cases(int perHost, int racks, int ranks) {
  auto host = [perHost](int i) { return "host" + std::to_string(i / perHost); };
  const int perRack = std::max(1, ranks / racks);
  auto rack = [perRack](int i) { return "rack" + std::to_string(i / perRack); };
  const int spareRanksPerRack = perRack / 8;
  return {
      {"default", [] { return defaultRankAssignment(); }},
      {"fill-gaps+max-active",
       [ranks] {
         return compose({maxActiveWorldSize(ranks - ranks / 8), activateAllRanks(), fillGaps()});
       }},
      {"filter-per-host+shift",
       [perHost] {
         return compose(
             {filterCountGroupedByKey([perHost](int n) { return n == perHost; }, "full hosts"),
              activateAllRanks(), shiftRanks()});
       }},
      {"divisible-by-64+shift",
       [] {
         return compose({activeWorldSizeDivisibleBy(64), activateAllRanks(), shiftRanks()});
       }},
      // One spare per host; without one, the rack backfills.
      {"tree3 host-reserve",
       [=] {
         return tree({Layer{1, -1, {}, Layer::kNone}, Layer{1, -1, rack, Layer::kBackfill},
                      Layer{perHost - 2, perHost - 1, host, Layer::kReserve}});
       }},
      // Spare hosts in every rack (1/8 of its ranks); without one, the rack backfills.
      {"tree3 rack-reserve",
       [=] {
         return tree(
             {Layer{1, -1, {}, Layer::kNone},
              Layer{1, perRack - spareRanksPerRack, rack, Layer::kReserve | Layer::kBackfill},
              Layer{1, -1, host, Layer::kNone}});
       }},
      // Spares searched host, then rack, then job; a world size that is a multiple of 64.
      {"tree3 all-reserve+filter",
       [=] {
         return tree({Layer{1, -1, {}, Layer::kReserve},
                      Layer{1, -1, rack, Layer::kReserve | Layer::kBackfill},
                      Layer{perHost - 2, perHost - 1, host, Layer::kReserve}},
                     [](int n) { return n - n % 64; });
       }},
  };
}

// How a policy is timed.
struct RunOptions {
  int ranks = 0;      // initial world size
  int failures = 0;   // ranks terminated before the timed assignment
  int reps = 1;       // repetitions (the median is reported)
  unsigned seed = 1;  // seed of the first repetition's failures
  int perHost = 1;    // ranks per host
};

Row runCase(const Case& c, const RunOptions& run) {
  auto host = [perHost = run.perHost](int i) { return "host" + std::to_string(i / perHost); };
  Row row;
  row.name = c.name;
  std::vector<double> first;
  std::vector<double> after;
  std::vector<double> afterCpu;
  RankAssignmentPtr policy;
  World w0(run.ranks);
  for (int rep = 0; rep < run.reps; ++rep) {
    policy = c.make();
    AssignmentContext c0;
    c0.firstIteration = true;
    c0.key = host;
    first.push_back(timeMs([&] { w0 = assignRanks(World(run.ranks), *policy, c0); }).wallMs);
  }
  row.policy = policy->describe();
  for (int rep = 0; rep < run.reps; ++rep) {
    std::vector<int> live = w0.liveByRank();
    std::mt19937 rng(run.seed + static_cast<unsigned>(rep));
    std::shuffle(live.begin(), live.end(), rng);
    AssignmentContext c1;
    c1.terminated.assign(live.begin(), live.begin() + std::min<size_t>(live.size(), run.failures));
    c1.key = host;
    World w1(1);
    const Timing t = timeMs([&] { w1 = assignRanks(w0, *policy, c1); });
    after.push_back(t.wallMs);
    afterCpu.push_back(t.cpuMs);
    if (rep == 0) {
      row.worldSize = w1.worldSize();
      row.activeWorldSize = w1.activeWorldSize();
    }
  }
  row.firstMs = median(first);
  row.afterMs = median(after);
  row.afterCpuMs = median(afterCpu);
  row.afterMinMs = *std::min_element(after.begin(), after.end());
  row.afterMaxMs = *std::max_element(after.begin(), after.end());
  return row;
}

std::string machine() {
  utsname u{};
  ::uname(&u);
  double load[3] = {0, 0, 0};
  const int got = ::getloadavg(load, 3);
  char text[64];
  std::snprintf(text, sizeof text, "load average %.2f %.2f %.2f", load[0], load[1], load[2]);
  return std::string(u.sysname) + " " + u.release + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " cpus, " +
         (got == 3 ? text : "load average unknown");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rank assignment time for a large job after many failures."};
  int ranks = 16384;
  int failures = 1024;
  int reps = 21;
  int perHost = 8;
  int racks = 32;
  unsigned seed = 1;
  std::string jsonPath;
  app.add_option("--ranks", ranks, "initial world size")->capture_default_str();
  app.add_option("--failures", failures, "ranks terminated before the timed assignment")
      ->capture_default_str();
  app.add_option("--reps", reps, "repetitions (the median is reported)")->capture_default_str();
  app.add_option("--per-host", perHost, "ranks per host")->capture_default_str();
  app.add_option("--racks", racks, "racks (the Tree's middle layer)")->capture_default_str();
  app.add_option("--seed", seed, "seed of the first repetition's failures")->capture_default_str();
  app.add_option("--json", jsonPath, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (ranks < 2 || failures < 0 || failures >= ranks || reps < 1 || perHost < 2 || racks < 1) {
    std::fprintf(stderr, "need ranks >= 2, 0 <= failures < ranks, reps >= 1, per-host >= 2\n");
    return 2;
  }

  std::printf("rank assignment: %d ranks (hosts of %d, %d racks), %d failures, median of %d; %s\n",
              ranks, perHost, racks, failures, reps, machine().c_str());
  std::printf("%-26s | %9s | %9s %9s %9s %9s | %6s %6s\n", "policy", "first ms", "after ms", "min",
              "max", "cpu ms", "world", "active");
  std::vector<Row> rows;
  for (const Case& c : cases(perHost, racks, ranks)) {
    const Row r = runCase(
        c, {.ranks = ranks, .failures = failures, .reps = reps, .seed = seed, .perHost = perHost});
    std::printf("%-26s | %9.3f | %9.3f %9.3f %9.3f %9.3f | %6d %6d\n", r.name.c_str(), r.firstMs,
                r.afterMs, r.afterMinMs, r.afterMaxMs, r.afterCpuMs, r.worldSize,
                r.activeWorldSize);
    rows.push_back(r);
  }

  std::ostringstream json;
  json << "{\"benchmark\":\"rank-assignment\",\"machine\":\"" << machine()
       << "\",\"ranks\":" << ranks << ",\"failures\":" << failures << ",\"reps\":" << reps
       << ",\"perHost\":" << perHost << ",\"racks\":" << racks << ",\"seed\":" << seed
       << ",\"results\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << (i ? "," : "") << "{\"name\":\"" << r.name << "\",\"policy\":\"" << r.policy
         << "\",\"firstMs\":" << r.firstMs << ",\"afterMs\":" << r.afterMs
         << ",\"afterMinMs\":" << r.afterMinMs << ",\"afterMaxMs\":" << r.afterMaxMs
         << ",\"afterCpuMs\":" << r.afterCpuMs << ",\"worldSize\":" << r.worldSize
         << ",\"activeWorldSize\":" << r.activeWorldSize << "}";
  }
  json << "]}";
  std::printf("%s\n", json.str().c_str());
  if (!jsonPath.empty()) {
    std::ofstream(jsonPath) << json.str() << "\n";
  }
  return 0;
}
