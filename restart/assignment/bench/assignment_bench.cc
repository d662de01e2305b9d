#include <chrono>
#include <cstdio>
#include <random>
// Rank assignment of a 16,384-rank world after 1,024 random terminations, for
// three policies: prints one line each (time of assignRanks()). The reference
// restarter asserts < 1 s for this case; we report it (docs/performance.md).
#include "resilient/restart/tree.hpp"
using namespace resilient::restart;
int main() {
  const int n = 16384;
  std::mt19937 rng(1);
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i)
    all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int> dead(all.begin(), all.begin() + 1024);
  auto host = [](int i) { return std::to_string(i / 8); };
  auto rack = [](int i) { return std::to_string(i / 64); };
  struct P {
    const char* name;
    RankAssignmentPtr p;
  } ps[] = {{"default", defaultRankAssignment()},
            {"fill+max", compose({maxActiveWorldSize(15000), activateAllRanks(), fillGaps()})},
            {"tree3", tree({Layer{1, -1, {}, Layer::kReserve},
                            Layer{1, -1, rack, Layer::kReserve | Layer::kBackfill},
                            Layer{6, 7, host, Layer::kReserve}})}};
  for (auto& p : ps) {
    AssignmentContext c0;
    c0.firstIteration = true;
    World w0 = assignRanks(World(n), *p.p, c0);
    AssignmentContext c;
    c.terminated = dead;
    auto t0 = std::chrono::steady_clock::now();
    World w = assignRanks(w0, *p.p, c);
    auto t1 = std::chrono::steady_clock::now();
    std::printf("%-10s %d ranks, 1024 terminated: %.1f ms (world %d, active %d)\n", p.name, n,
                std::chrono::duration<double, std::milli>(t1 - t0).count(), w.worldSize(),
                w.activeWorldSize());
  }
}
