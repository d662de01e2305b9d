#include "jobhealth/rank_progress.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace resilient::jobhealth {
namespace {

std::tuple<uint64_t, uint64_t> progressKey(const resilient_blackbox_comm& c) {
  return {c.collCompleted, c.collEnqueued};
}

}  // namespace

std::vector<CommComparison> compareRanks(const std::vector<blackbox::Snapshot>& snapshots) {
  std::map<uint64_t, CommComparison> byComm;
  for (const auto& snap : snapshots) {
    for (const auto& view : snap.comms) {
      const auto& c = view.comm;
      auto& cmp = byComm[c.commId];
      cmp.commId = c.commId;
      // One entry per rank: an active slot wins over a finalized one.
      auto same = std::find_if(cmp.ranks.begin(), cmp.ranks.end(), [&](const RankProgress& r) {
        return r.comm.rank == c.rank && r.pid == snap.header.pid;
      });
      if (same != cmp.ranks.end()) {
        if (same->comm.state == RESILIENT_BLACKBOX_COMM_ACTIVE ||
            c.state != RESILIENT_BLACKBOX_COMM_ACTIVE) {
          continue;
        }
        cmp.ranks.erase(same);
      }
      RankProgress r;
      r.source = snap.path;
      r.pid = snap.header.pid;
      r.processAlive = snap.processAlive;
      r.comm = c;
      cmp.ranks.push_back(r);
    }
  }
  std::vector<CommComparison> out;
  for (auto& [id, cmp] : byComm) {
    std::sort(cmp.ranks.begin(), cmp.ranks.end(), [](const RankProgress& a, const RankProgress& b) {
      return a.comm.rank < b.comm.rank;
    });
    const auto [minIt, maxIt] = std::minmax_element(
        cmp.ranks.begin(), cmp.ranks.end(), [](const RankProgress& a, const RankProgress& b) {
          return progressKey(a.comm) < progressKey(b.comm);
        });
    const auto low = progressKey(minIt->comm);
    const auto high = progressKey(maxIt->comm);
    if (low < high) {
      for (const auto& r : cmp.ranks) {
        if (progressKey(r.comm) == low) {
          cmp.behind.push_back(r.comm.rank);
        }
      }
    }
    std::string ranks;
    for (int b : cmp.behind) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(b);
    }
    if (cmp.behind.empty()) {
      cmp.summary = "all " + std::to_string(cmp.ranks.size()) + " ranks seen at " +
                    std::to_string(std::get<0>(high)) + " collectives completed, " +
                    std::to_string(std::get<1>(high)) + " enqueued";
    } else {
      cmp.summary = "rank(s) " + ranks + " behind: " + std::to_string(std::get<0>(low)) +
                    " collectives completed and " + std::to_string(std::get<1>(low)) +
                    " enqueued, others up to " + std::to_string(std::get<0>(high)) +
                    " completed and " + std::to_string(std::get<1>(high)) + " enqueued";
    }
    out.push_back(std::move(cmp));
  }
  return out;
}

}  // namespace resilient::jobhealth
