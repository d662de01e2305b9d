// A finding of the job's health comparison: a slow link, a straggler or a
// stuck rank. Not a fault: nothing aborts because of it unless the user asks
// (NCCL_RESILIENT_SLOW_LINK_ACTION, NCCL_RESILIENT_STRAGGLER_ACTION,
// NCCL_RESILIENT_STUCK_RANK_ACTION). The detectors (slow_links.h,
// stragglers.h, stuck_ranks.h) make them; the restart library logs
// one WARN each, writes it into the store and into the blackbox of the
// process it names (as a report record, RESILIENT_BLACKBOX_IS_REPORT);
// resilient-inspect --job prints them. Plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "resilient/blackbox.h"

namespace resilient::jobhealth {

// One end of a link, or the straggling process.
struct ProcessEnd {
  int rank = -1;  // the job's rank; -1 unknown
  std::string host;
  uint32_t pid = 0;
  std::string address;  // the link's endpoint at this end; empty for a straggler
};

struct HealthReport {
  enum class Kind { kSlowLink, kStraggler, kStuckRank };
  Kind kind = Kind::kSlowLink;
  uint64_t commId = 0;
  uint64_t wallNs = 0;  // when it was found
  ProcessEnd subject;   // slow link: the sending end; straggler: the late rank
  ProcessEnd peer;      // slow link: the receiving end
  // Slow link: bytes per second while busy, over the window, and what it is
  // compared with (the median of the job's other links, or the link's own
  // best window); ratio = bytesPerS / referenceBytesPerS.
  double bytesPerS = 0;
  double referenceBytesPerS = 0;  // 0: the other links were never busy (far faster)
  double ratio = 0;
  bool againstHistory = false;  // compared with its own best window, not its peers
  // Straggler: of `collectives` collectives of the communicator in the
  // window, `waited` waited `minLagNs` or more for their last rank; this rank
  // was last in `lastCount` of those, by `lagNs` (median) after the median
  // rank.
  int collectives = 0;
  int waited = 0;
  int lastCount = 0;
  uint64_t lagNs = 0;
  uint64_t minLagNs = 0;
  uint64_t windowNs = 0;
  // Stuck rank: the subject has not entered collective `collIndex`
  // (`function`) of the communicator, which `waitingRanks` of its ranks have
  // waited in for `waitedNs` (the earliest of them), past `minLagNs` (the
  // stuck-rank timeout).
  uint64_t collIndex = 0;
  std::string function;
  int waitingRanks = 0;
  uint64_t waitedNs = 0;
  // The report's action is restart (NCCL_RESILIENT_*_ACTION): the job
  // restarts without the subject. Set by whoever acts on it.
  bool restarts = false;
};

const char* reportKindName(HealthReport::Kind kind) noexcept;
std::optional<HealthReport::Kind> parseReportKind(std::string_view name) noexcept;
// One line for people (the WARN, the blackbox record's text).
std::string describe(const HealthReport& r);
// The report as a record of the blackbox's fault ring (class SLOW_LINK or
// STRAGGLER; peerPid/peerHost/peer name the subject, rank its rank).
resilient_blackbox_fault toBlackboxRecord(const HealthReport& r);

}  // namespace resilient::jobhealth
