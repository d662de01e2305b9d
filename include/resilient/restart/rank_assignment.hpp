// Rank assignment policies: how the World of the next iteration follows from
// the previous one and the ranks terminated since (the native counterpart of
// the reference restarter's rank_assignment module, docs/reference/restart-model.md §1.2).
//
// Two kinds of policy, composed with compose() (the last one runs first):
//  - renumbering: shiftRanks(), fillGaps() close the holes the terminated
//    ranks left (one of them must run, or the World is inconsistent);
//  - activity: activateAllRanks() makes every live rank active; the filters
//    maxActiveWorldSize(), activeWorldSizeDivisibleBy() and
//    filterCountGroupedByKey() only deactivate (make spares). Without
//    activateAllRanks() modes carry over from the previous iteration.
// The default is compose({activateAllRanks(), shiftRanks()}).
//
// Every rank evaluates the same policies on the same inputs and so computes
// the same World; policies must be deterministic.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "resilient/restart/visibility.h"
#include "resilient/restart/world.hpp"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

// What a policy may consult besides the World.
struct AssignmentContext {
  // Initial ranks terminated since the previous iteration (already marked;
  // may name a joiner's new slot).
  std::vector<int> terminated;
  // The grouping key of an initial rank (e.g. its host, from the store's rank
  // registry); needed by filterCountGroupedByKey().
  std::function<std::string(int initialRank)> key;
  // The first assignment of the job (policies that build a layout, like
  // tree(), do it then).
  bool firstIteration = false;
  // Processes that joined the running job since the previous iteration
  // (resilient-run's replacements): assignRanks adds this many spares, new
  // initial ranks after the previous World's, before the terminations and
  // the policy.
  int joined = 0;
  // The World before this iteration's terminations (set by assignRanks).
  const World* previous = nullptr;
};

class RankAssignment {
 public:
  virtual ~RankAssignment() = default;
  virtual void apply(World& world, const AssignmentContext& context) const = 0;
  virtual std::string describe() const = 0;
};
using RankAssignmentPtr = std::shared_ptr<const RankAssignment>;

// A policy left the World inconsistent, or its input was unusable.
class AssignmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Survivors keep their order and slide down: ranks 0..n-1 in the old order.
RankAssignmentPtr shiftRanks();
// Survivors whose rank is below the new world size keep it; the survivors
// above fill the holes, lowest hole first, in their rank order.
RankAssignmentPtr fillGaps();
// Every live rank becomes active.
RankAssignmentPtr activateAllRanks();
// At most `maxActive` active ranks: the lowest-ranked active ones stay.
RankAssignmentPtr maxActiveWorldSize(int maxActive);
// The active count is cut down to a multiple of `divisor` (the
// highest-ranked active ones become spares).
RankAssignmentPtr activeWorldSizeDivisibleBy(int divisor);
// Groups the live ranks by context.key; every rank of a group whose live count
// fails `condition` becomes a spare (e.g. "a host with fewer than 8 live
// ranks does not compute"). `description` names the condition in messages.
RankAssignmentPtr filterCountGroupedByKey(std::function<bool(int liveCount)> condition,
                                          std::string description);
// Applies `policies` from the last to the first.
RankAssignmentPtr compose(std::vector<RankAssignmentPtr> policies);
// compose({activateAllRanks(), shiftRanks()})
RankAssignmentPtr defaultRankAssignment();

// One iteration's assignment: `previous` with `context.terminated` marked,
// then `policy`, then the active ranks renumbered. Throws AssignmentError when
// the result is inconsistent (naming what is wrong) or when a terminated rank
// is not in the world.
World assignRanks(const World& previous, const RankAssignment& policy,
                  const AssignmentContext& context);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
