// Topology-aware rank assignment (the reference restarter's Tree, in our own
// terms): the ranks form a tree of domains, e.g. job -> host, or
// job -> rack -> host, given by one key function per layer below the root.
//
// First iteration: ranks are activated depth-first (domains in the order of
// their lowest initial rank), each domain holding at most its layer's
// maxRanks active ranks; the others are spares. Active ranks take ranks
// 0..a-1 in that order, spares the ranks after them.
//
// After failures, in this order:
//  1. a domain left with fewer live ranks than its layer's minRanks is
//     terminated whole (a host that lost a GPU drops out);
//  2. each failed active rank is replaced by a spare: the lowest-ranked live
//     spare of the nearest enclosing domain whose layer is RESERVE; the spare
//     takes over the failed rank's rank and is activated;
//  3. a failed active rank without a spare, inside a BACKFILL domain, is
//     replaced by the highest-ranked active rank of that domain (the hole
//     moves to the domain's end);
//  4. the remaining holes are closed by shifting (order kept);
//  5. an optional world-size filter cuts the active count (highest-ranked
//     active ranks become spares), e.g. to a multiple of 8.
// A Tree is a complete policy: it is not composed with other policies.
//
// Keys are evaluated once per initial world size (n calls per layer) and the
// resulting layout is kept by the policy and reused on every later
// assignment: a key must depend on the initial rank only. An assignment is
// then O(n * layers) plus O(log n) per failed rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "resilient/restart/rank_assignment.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

struct Layer {
  enum Flag : unsigned {
    kNone = 0,
    kReserve = 1u << 0,   // spares of this domain may replace its failed ranks
    kBackfill = 1u << 1,  // without a spare, the domain's last active rank fills the hole
  };
  int minRanks = 1;   // fewer live ranks: the domain is terminated
  int maxRanks = -1;  // at most this many active ranks per domain (-1: no limit)
  std::function<std::string(int initialRank)> key;  // domain of a rank (unused for the root)
  unsigned flags = kNone;
};

// `layers[0]` is the root (the whole job); each further layer splits its
// parent's domains by its key. `worldSizeFilter(activeCount)` returns the
// active count to keep (<= activeCount); empty: keep all.
RankAssignmentPtr tree(std::vector<Layer> layers,
                       std::function<int(int activeCount)> worldSizeFilter = {});

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
