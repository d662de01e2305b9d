// Slow links: each sending link's throughput while busy, compared with the
// job's other links and with its own history (docs/observability.md, "Slow
// links").
//
// The net plugin's watchdog samples, at each tick, whether a connection has
// requests outstanding (blackbox busyNs). A send waits on a slow link and not
// on a fast one: in a ring gated by one slow link every link moves the same
// bytes, but only the slow one is busy all the time. So over a window, bytes
// over busy time is the link's own speed, and a link far below the median of
// the job's other sending links (the lower median: one far faster link does
// not pull it up), or far below its own best window, is slow.
// Receives are not compared: a posted receive waits for its sender, however
// fast its link.
// A link held back by its receiver is not slow: a rank whose own sending link
// is slow stops draining its receives (its buffers wait on that send), so the
// link into it backs up too, busy at a speed between the slow link's and the
// others' (seen: 6.2 MB/s into a rank whose link ran at 2.1 MB/s, the others
// never busy). A link below the threshold whose receiver has a slower busy
// sending link on the same communicator is left to that link.
//
// Fed with rounds of every rank's samples (health_sample.h); a link is
// reported once it stayed below the threshold for half a window after a full
// window of data, and again only after a full window back above it.
// Single-threaded (the caller's).
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "jobhealth/report.h"
#include "jobhealth/sample.h"

namespace resilient::jobhealth {

struct SlowLinkOptions {
  double ratio = 0.4;                     // NCCL_RESILIENT_SLOW_LINK_PERCENT / 100
  uint64_t windowNs = 4000000000ull;      // NCCL_RESILIENT_SLOW_LINK_WINDOW_MS
  double minBusyFraction = 0.2;           // below: the link waited little, it is not slow
  uint64_t minBytes = uint64_t{1} << 20;  // moved in the window, else the link is idle
};

// One link's standing in the last round (resilient-inspect's live view, the
// metrics).
struct LinkStanding {
  ProcessEnd from;
  ProcessEnd to;
  uint64_t commId = 0;
  double bytesPerS = 0;     // while busy over the window; 0 not measured
  double busyFraction = 0;  // of the window
  double ratio = 0;         // to the reference; 0 not compared
  bool slow = false;        // below the threshold in this round
};

class SlowLinkDetector {
 public:
  explicit SlowLinkDetector(SlowLinkOptions options) : options_(options) {}

  // One round: every rank's sample, taken at about the same time. Returns
  // the links newly found slow.
  std::vector<HealthReport> update(const std::vector<RankSample>& ranks);
  const std::vector<LinkStanding>& standings() const { return standings_; }
  // Link windows measured so far (a full window with traffic, per round).
  uint64_t measured() const { return measured_; }

 private:
  using Key = std::tuple<std::string, uint32_t, uint64_t, std::string, std::string>;
  struct Point {
    uint64_t wallNs;
    uint64_t bytes;
    uint64_t busyNs;
  };
  struct History {
    std::deque<Point> points;
    uint64_t belowSinceNs = 0;
    uint64_t aboveSinceNs = 0;
    bool reported = false;
    double bestBytesPerS = 0;
    uint64_t lastSeenNs = 0;
    // The latest window's speed while busy, when the link was busy for a
    // good part of it (Measured::evaluated); else infinity.
    double lastBusyBytesPerS = std::numeric_limits<double>::infinity();
  };
  // One link's window in this round.
  struct Measured {
    History* history;
    LinkStanding standing;
    double value;  // bytes/s while busy; infinity when it was never busy
    bool evaluated;
    uint64_t nowNs;
  };
  // Where a link stands against the others and its own best.
  struct Comparison {
    bool below = false;
    double reference = 0;  // what it was compared with (bytes/s); infinity: all never busy
    bool againstHistory = false;
  };

  // The window of every sending link with a new point; links of processes gone
  // from the rounds forgotten after two windows.
  std::vector<Measured> measureLinks(const std::vector<RankSample>& ranks);
  // measured[i] against the lower median of the others, then its own best.
  Comparison compare(std::vector<Measured>& measured, size_t i);
  // Whether the receiver of `m` has a sending link on the same communicator,
  // seen within a window, that was busy and slower than `m`: what held it back.
  bool heldByReceiver(const Measured& m) const;
  // The link's time below (or above) the threshold: a report once it has been
  // below for half a window, again only after a full window back above.
  std::optional<HealthReport> track(const Measured& m, const Comparison& c);

  SlowLinkOptions options_;
  std::map<Key, History> links_;
  std::vector<LinkStanding> standings_;
  uint64_t measured_ = 0;
};

}  // namespace resilient::jobhealth
