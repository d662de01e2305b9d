#include "jobhealth/stuck_ranks.h"

#include <algorithm>

namespace resilient::jobhealth {

std::vector<HealthReport> StuckRankDetector::update(const std::vector<RankSample>& ranks) {
  const auto member = [this](uint64_t commId, int rank, const RankSample& s) -> Member& {
    Member& m = comms_[commId].members[rank];
    m.who = {s.rank, s.host, s.pid, {}};
    return m;
  };
  const auto entered = [](Member& m, uint64_t index, uint64_t wallNs) {
    if (index > m.lastIndex || m.lastWallNs == 0) {
      m.lastIndex = index;
      m.lastWallNs = wallNs;
    }
  };
  for (const RankSample& s : ranks) {
    for (const Arrival& a : s.arrivals) {
      entered(member(a.commId, a.rank, s), a.collIndex, a.wallNs);
      if (!a.function.empty()) {
        comms_[a.commId].functions[a.collIndex] = a.function;
      }
    }
    // What the process says of itself now, for every communicator it is a
    // member of (arrivals of this or earlier rounds made it one).
    for (auto& [commId, comm] : comms_) {
      for (auto& [rank, m] : comm.members) {
        if (m.who.pid != s.pid || m.who.host != s.host) {
          continue;
        }
        m.sampleWallNs = s.wallNs;
        m.lastPingWallNs = s.lastPingWallNs;
        m.declared = s.waitingDeclared;
        m.insideAny = !s.inside.empty();
        m.insideHere = 0;
        for (const Inside& i : s.inside) {
          if (i.commId == commId) {
            m.insideHere = i.collIndex;
            entered(m, i.collIndex, i.wallNs);
            if (!i.function.empty()) {
              comm.functions[i.collIndex] = i.function;
            }
          }
        }
      }
    }
  }
  std::vector<HealthReport> found;
  for (auto& [commId, comm] : comms_) {
    // The collective some members wait in: the newest any member is inside,
    // and since when the first of them waits.
    uint64_t top = 0;
    for (const auto& [rank, m] : comm.members) {
      top = std::max(top, m.insideHere);
    }
    int waiting = 0;
    uint64_t since = 0;
    for (const auto& [rank, m] : comm.members) {
      if (top != 0 && m.insideHere == top && m.lastWallNs != 0) {
        ++waiting;
        since = since == 0 ? m.lastWallNs : std::min(since, m.lastWallNs);
      }
    }
    if (waiting == 0) {
      continue;
    }
    for (const auto& [rank, m] : comm.members) {
      if (m.lastIndex >= top || m.insideAny || m.declared ||
          m.lastPingWallNs + options_.timeoutNs > m.sampleWallNs ||
          m.sampleWallNs < since + options_.timeoutNs ||
          !comm.reported.insert({rank, top}).second) {
        continue;
      }
      HealthReport r;
      r.kind = HealthReport::Kind::kStuckRank;
      r.commId = commId;
      r.wallNs = m.sampleWallNs;
      r.subject = m.who;
      r.collIndex = top;
      const auto fn = comm.functions.find(top);
      r.function = fn != comm.functions.end() ? fn->second : std::string();
      r.waitingRanks = waiting;
      r.waitedNs = m.sampleWallNs - since;
      r.minLagNs = options_.timeoutNs;
      found.push_back(std::move(r));
    }
  }
  return found;
}

}  // namespace resilient::jobhealth
