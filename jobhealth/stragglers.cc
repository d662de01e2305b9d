#include "jobhealth/stragglers.h"

#include <algorithm>

namespace resilient::jobhealth {
namespace {

uint64_t medianOf(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

// How much of the last rank's lateness is its own: its time between the end
// of its previous collective and this arrival, beyond the median rank's. A
// rank that finished the previous collective late (a slow link into it) and
// came straight back is late, but not by its own doing. Without the previous
// ends of every rank (the first collective, a ring that wrapped, NCCL
// enqueueing ahead of completion: a negative gap counts as 0) the arrival lag
// stands as it is, bounded by it in any case.
uint64_t StragglerDetector::ownLag(const Collective& c, size_t lastRank, uint64_t arrivalLag) {
  std::vector<uint64_t> gaps;
  for (size_t r = 0; r < c.wallNs.size(); ++r) {
    if (c.prevEndNs[r] == 0) {
      return arrivalLag;
    }
    gaps.push_back(c.wallNs[r] > c.prevEndNs[r] ? c.wallNs[r] - c.prevEndNs[r] : 0);
  }
  const uint64_t med = medianOf(gaps);
  const uint64_t own = gaps[lastRank] > med ? gaps[lastRank] - med : 0;
  return std::min(own, arrivalLag);
}

std::pair<size_t, uint64_t> StragglerDetector::lastOf(const Collective& c) {
  const bool gpuTimed =
      std::all_of(c.syncWaitNs.begin(), c.syncWaitNs.end(), [](uint64_t ns) { return ns != 0; });
  if (gpuTimed && c.syncWaitNs.size() > 1) {
    // The rank that waited least at the opening barrier arrived last.
    const auto least = std::min_element(c.syncWaitNs.begin(), c.syncWaitNs.end());
    const auto lastRank = static_cast<size_t>(least - c.syncWaitNs.begin());
    std::vector<uint64_t> others;
    for (size_t r = 0; r < c.syncWaitNs.size(); ++r) {
      if (r != lastRank) {
        others.push_back(c.syncWaitNs[r]);
      }
    }
    const uint64_t med = medianOf(others);
    return {lastRank, med > *least ? med - *least : 0};
  }
  const auto last = std::max_element(c.wallNs.begin(), c.wallNs.end());
  const auto lastRank = static_cast<size_t>(last - c.wallNs.begin());
  return {lastRank, ownLag(c, lastRank, *last - medianOf(c.wallNs))};
}

std::vector<HealthReport> StragglerDetector::update(const std::vector<RankSample>& ranks) {
  uint64_t now = 0;
  for (const auto& sample : ranks) {
    now = std::max(now, sample.wallNs);
    for (const Arrival& a : sample.arrivals) {
      if (a.nranks <= 0 || a.rank < 0 || a.rank >= a.nranks) {
        continue;
      }
      Comm& comm = comms_[a.commId];
      if (comm.nranks != a.nranks) {
        comm = Comm{};  // a new communicator under the same id: start over
        comm.nranks = a.nranks;
      }
      comm.who[a.rank] = {sample.rank >= 0 ? sample.rank : a.rank, sample.host, sample.pid, {}};
      now = std::max(now, a.wallNs);
      if (comm.doneIndices.count(a.collIndex) != 0) {
        continue;
      }
      Collective& c = comm.pending[a.collIndex];
      if (c.wallNs.empty()) {
        c.wallNs.assign(static_cast<size_t>(a.nranks), 0);
        c.prevEndNs.assign(static_cast<size_t>(a.nranks), 0);
        c.syncWaitNs.assign(static_cast<size_t>(a.nranks), 0);
        c.firstNs = a.wallNs;
      }
      uint64_t& slot = c.wallNs[static_cast<size_t>(a.rank)];
      if (slot != 0) {
        continue;
      }
      slot = a.wallNs;
      c.prevEndNs[static_cast<size_t>(a.rank)] = a.prevEndWallNs;
      c.syncWaitNs[static_cast<size_t>(a.rank)] = a.syncWaitNs;
      c.firstNs = std::min(c.firstNs, a.wallNs);
      if (++c.seen < a.nranks) {
        continue;
      }
      const auto [lastRank, lag] = lastOf(c);
      comm.done.push_back({*std::max_element(c.wallNs.begin(), c.wallNs.end()), a.collIndex,
                           static_cast<int>(lastRank), lag});
      ++compared_;
      comm.doneIndices.insert(a.collIndex);
      comm.pending.erase(a.collIndex);
    }
  }

  std::vector<HealthReport> found;
  standings_.clear();
  for (auto& [commId, comm] : comms_) {
    const uint64_t from = now > options_.windowNs ? now - options_.windowNs : 0;
    // Forget collectives long done, and ones some rank never reported (it
    // left: a restart makes new communicators).
    while (!comm.done.empty() && comm.done.front().wallNs + 2 * options_.windowNs < now) {
      comm.doneIndices.erase(comm.done.front().collIndex);
      comm.done.pop_front();
    }
    for (auto it = comm.pending.begin(); it != comm.pending.end();) {
      it =
          it->second.firstNs + 2 * options_.windowNs < now ? comm.pending.erase(it) : std::next(it);
    }
    // Only collectives that waited for their last rank count: a straggler
    // delays the first collective after its compute, the ones right after it
    // start level (a step with several all-reduces), and a ring's own order
    // makes lags of a few microseconds.
    int total = 0;
    int waited = 0;
    std::map<int, std::vector<uint64_t>> lags;
    for (const Done& d : comm.done) {
      if (d.wallNs < from) {
        continue;  // before the window
      }
      ++total;
      if (d.lagNs >= options_.minLagNs) {
        ++waited;
        lags[d.lastRank].push_back(d.lagNs);
      }
    }
    for (const auto& [rank, rankLags] : lags) {
      RankLateness l;
      l.commId = commId;
      l.rank = comm.who.count(rank) != 0 ? comm.who[rank] : ProcessEnd{};
      l.collectives = total;
      l.waited = waited;
      l.lastCount = static_cast<int>(rankLags.size());
      l.lagNs = medianOf(rankLags);
      l.score = static_cast<double>(l.lastCount) / waited;
      l.straggler = waited >= options_.minCollectives && l.score >= options_.fraction;
      if (!l.straggler) {
        comm.reported.erase(rank);
      } else if (comm.reported.insert(rank).second) {
        HealthReport r;
        r.kind = HealthReport::Kind::kStraggler;
        r.commId = commId;
        r.wallNs = now;
        r.subject = l.rank;
        r.collectives = total;
        r.waited = waited;
        r.lastCount = l.lastCount;
        r.lagNs = l.lagNs;
        r.minLagNs = options_.minLagNs;
        r.windowNs = options_.windowNs;
        found.push_back(std::move(r));
      }
      standings_.push_back(std::move(l));
    }
    for (auto it = comm.reported.begin(); it != comm.reported.end();) {
      it = lags.count(*it) == 0 ? comm.reported.erase(it) : std::next(it);
    }
  }
  return found;
}

}  // namespace resilient::jobhealth
