#include "jobhealth/slow_links.h"

#include <algorithm>
#include <limits>

namespace resilient::jobhealth {
namespace {

constexpr double kFast = std::numeric_limits<double>::infinity();

// The lower median: with an even count the smaller of the middle two, so
// that one far faster link (a few bytes in a tick of busy time) does not pull
// the reference up (two other links: their mean made a healthy link look
// slow next to a 4.5 GB/s one under load).
double lowerMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// The job's rank of the process (host, pid), or -1.
int rankOf(const std::vector<RankSample>& ranks, const std::string& host, uint32_t pid) {
  for (const auto& r : ranks) {
    if (r.pid == pid && (host.empty() || r.host == host)) {
      return r.rank;
    }
  }
  return -1;
}

}  // namespace

std::vector<SlowLinkDetector::Measured> SlowLinkDetector::measureLinks(
    const std::vector<RankSample>& ranks) {
  std::vector<Measured> measured;
  uint64_t latest = 0;
  for (const auto& rank : ranks) {
    latest = std::max(latest, rank.wallNs);
    for (const auto& link : rank.links) {
      if (!link.send) {
        continue;
      }
      History& h = links_[Key{rank.host, rank.pid, link.commId, link.local, link.peer}];
      h.lastSeenNs = rank.wallNs;
      if (!h.points.empty() && rank.wallNs <= h.points.back().wallNs) {
        continue;  // no new sample of this rank
      }
      h.points.push_back({rank.wallNs, link.bytes, link.busyNs});
      // Keep the newest point at least a window old, and nothing before it.
      while (h.points.size() > 2 && h.points[1].wallNs + options_.windowNs <= rank.wallNs) {
        h.points.pop_front();
      }
      const Point& first = h.points.front();
      const Point& last = h.points.back();
      if (last.wallNs < first.wallNs + options_.windowNs) {
        continue;  // less than a window of data yet
      }
      const double spanNs = static_cast<double>(last.wallNs - first.wallNs);
      const uint64_t bytes = last.bytes - first.bytes;
      const uint64_t busy = last.busyNs >= first.busyNs ? last.busyNs - first.busyNs : 0;
      if (bytes < options_.minBytes) {
        continue;  // idle: nothing to compare
      }
      ++measured_;
      Measured m{&h, {}, kFast, false, rank.wallNs};
      m.standing.commId = link.commId;
      m.standing.from = {rank.rank, rank.host, rank.pid, link.local};
      m.standing.to = {rankOf(ranks, link.peerHost, link.peerPid), link.peerHost, link.peerPid,
                       link.peer};
      m.standing.busyFraction = std::min(1.0, static_cast<double>(busy) / spanNs);
      if (busy > 0) {  // else it never waited: faster than anything measured
        m.value = static_cast<double>(bytes) * 1e9 / static_cast<double>(busy);
        m.standing.bytesPerS = m.value;
      }
      // Only a link that was busy for a good part of the window can be the
      // slow one: one that waited little was not what held the job back.
      m.evaluated = busy > 0 && m.standing.busyFraction >= options_.minBusyFraction;
      h.lastBusyBytesPerS = m.evaluated ? m.value : kFast;
      measured.push_back(std::move(m));
    }
  }
  for (auto it = links_.begin(); it != links_.end();) {
    it = it->second.lastSeenNs + 2 * options_.windowNs < latest ? links_.erase(it) : std::next(it);
  }
  return measured;
}

SlowLinkDetector::Comparison SlowLinkDetector::compare(std::vector<Measured>& measured, size_t i) {
  Measured& m = measured[i];
  History& h = *m.history;
  Comparison c;
  if (!m.evaluated) {
    return c;
  }
  std::vector<double> others;
  for (size_t j = 0; j < measured.size(); ++j) {
    if (j != i) {
      others.push_back(measured[j].value);
    }
  }
  if (others.size() >= 2) {
    c.reference = lowerMedian(others);
    m.standing.ratio = c.reference == kFast ? 0 : m.value / c.reference;
    c.below = m.standing.ratio < options_.ratio;
  }
  if (!c.below && h.bestBytesPerS > 0 && m.value < options_.ratio * h.bestBytesPerS) {
    c.below = true;
    c.againstHistory = true;
    c.reference = h.bestBytesPerS;
    m.standing.ratio = m.value / c.reference;
  }
  if (!c.below) {
    h.bestBytesPerS = std::max(h.bestBytesPerS, m.value);
  } else if (heldByReceiver(m)) {
    c = Comparison{};
  }
  return c;
}

bool SlowLinkDetector::heldByReceiver(const Measured& m) const {
  const ProcessEnd& to = m.standing.to;
  for (const auto& [key, h] : links_) {
    if (std::get<1>(key) == to.pid && (to.host.empty() || std::get<0>(key) == to.host) &&
        std::get<2>(key) == m.standing.commId &&
        h.lastSeenNs + options_.windowNs >= m.nowNs && h.lastBusyBytesPerS < m.value) {
      return true;
    }
  }
  return false;
}

std::optional<HealthReport> SlowLinkDetector::track(const Measured& m, const Comparison& c) {
  History& h = *m.history;
  if (!c.below) {
    h.belowSinceNs = 0;
    // Reported again only after a full window back above the threshold.
    if (h.aboveSinceNs == 0) {
      h.aboveSinceNs = m.nowNs;
    }
    if (m.nowNs >= h.aboveSinceNs + options_.windowNs) {
      h.reported = false;
    }
    return std::nullopt;
  }
  h.aboveSinceNs = 0;
  if (h.belowSinceNs == 0) {
    h.belowSinceNs = m.nowNs;
  }
  if (h.reported || m.nowNs < h.belowSinceNs + options_.windowNs / 2) {
    return std::nullopt;
  }
  h.reported = true;
  HealthReport r;
  r.kind = HealthReport::Kind::kSlowLink;
  r.commId = m.standing.commId;
  r.wallNs = m.nowNs;
  r.subject = m.standing.from;
  r.peer = m.standing.to;
  r.bytesPerS = m.value;
  r.referenceBytesPerS = c.reference == kFast ? 0 : c.reference;
  r.ratio = m.standing.ratio;
  r.againstHistory = c.againstHistory;
  r.windowNs = options_.windowNs;
  return r;
}

std::vector<HealthReport> SlowLinkDetector::update(const std::vector<RankSample>& ranks) {
  std::vector<Measured> measured = measureLinks(ranks);
  std::vector<HealthReport> found;
  standings_.clear();
  for (size_t i = 0; i < measured.size(); ++i) {
    const Comparison c = compare(measured, i);
    measured[i].standing.slow = c.below;
    if (std::optional<HealthReport> r = track(measured[i], c)) {
      found.push_back(std::move(*r));
    }
    standings_.push_back(measured[i].standing);
  }
  return found;
}

}  // namespace resilient::jobhealth
