#include "restart/comm/collective_arrivals.h"

#include "common/clock.h"

namespace resilient::restart {
namespace {
// Enough for the health exchange's look-back (three intervals) at any
// realistic rate of collectives per group.
constexpr size_t kRecent = 256;
}  // namespace

CollectiveArrivals& CollectiveArrivals::process() {
  static CollectiveArrivals arrivals;
  return arrivals;
}

uint64_t CollectiveArrivals::commIdOf(std::string_view group) noexcept {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, over "group:" and the name
  for (const char c : std::string_view("group:")) {
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  for (const char c : group) {
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  return h;
}

uint64_t CollectiveArrivals::enter(std::string_view group, std::string_view function, int rank,
                                   int nranks) {
  const uint64_t now = wallClockNs();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = groups_.find(group);
  if (it == groups_.end()) {
    it = groups_.emplace(std::string(group), Group{}).first;
    it->second.commId = commIdOf(group);
  }
  Group& g = it->second;
  if (g.inside) {
    g.lastEndWallNs = now;
  }
  jobhealth::Arrival a;
  a.commId = g.commId;
  a.collIndex = g.nextIndex++;
  a.rank = rank;
  a.nranks = nranks;
  a.wallNs = now;
  a.prevEndWallNs = g.lastEndWallNs;
  a.function = std::string(function);
  g.recent.push_back(std::move(a));
  if (g.recent.size() > kRecent) {
    g.recent.pop_front();
  }
  g.inside = true;
  return g.nextIndex - 1;
}

void CollectiveArrivals::leave(std::string_view group) {
  const uint64_t now = wallClockNs();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = groups_.find(group);
  if (it != groups_.end() && it->second.inside) {
    it->second.inside = false;
    it->second.lastEndWallNs = now;
  }
}

void CollectiveArrivals::addTo(jobhealth::RankSample* sample, uint64_t sinceWallNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, g] : groups_) {
    for (const auto& a : g.recent) {
      if (a.wallNs >= sinceWallNs) {
        sample->arrivals.push_back(a);
      }
    }
    if (g.inside && !g.recent.empty()) {
      const jobhealth::Arrival& a = g.recent.back();
      sample->inside.push_back({g.commId, a.collIndex, a.wallNs, a.function});
    }
  }
}

}  // namespace resilient::restart
