// The job's ranks as the restart loop sees them in one iteration: one slot per
// initial rank (the rank a process had when the job started, or was given
// when it joined the running job in place of one that left) with its rank in
// this iteration, its mode and its rank among the active ones.
//
// Every rank computes the same World from the same inputs (the previous World
// and the initial ranks terminated since), so an assignment needs no exchange
// beyond agreeing on those inputs through the store.
#pragma once

#include <string>
#include <vector>

#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

enum class Mode {
  kActive,       // runs the wrapped function
  kInactive,     // a spare: alive, waits, may be activated in a later iteration
  kTerminated,   // gone for good (dead, unhealthy, or dropped by a policy)
  kInitialized,  // a State before the first rank assignment (never in a World)
};

const char* modeName(Mode mode) noexcept;

struct RankSlot {
  int rank = -1;  // rank in this iteration's world; -1 once terminated
  Mode mode = Mode::kActive;
  int activeRank = -1;  // position among the active ranks (rank order); -1 unless active
};

class World {
 public:
  // The first iteration: every initial rank active, rank == initial rank.
  explicit World(int initialWorldSize);

  int initialWorldSize() const noexcept { return static_cast<int>(slots_.size()); }
  int worldSize() const noexcept;        // ranks not terminated
  int activeWorldSize() const noexcept;  // active ranks
  // Throws std::out_of_range outside [0, initialWorldSize()).
  const RankSlot& at(int initialRank) const {
    if (initialRank < 0 || initialRank >= initialWorldSize()) {
      throwOutOfRange(initialRank);
    }
    return slots_[static_cast<size_t>(initialRank)];
  }
  RankSlot& at(int initialRank) {
    if (initialRank < 0 || initialRank >= initialWorldSize()) {
      throwOutOfRange(initialRank);
    }
    return slots_[static_cast<size_t>(initialRank)];
  }

  // Marks `initialRank` terminated (its rank becomes a hole until a
  // renumbering policy closes it).
  void terminate(int initialRank);
  bool terminated(int initialRank) const { return at(initialRank).mode == Mode::kTerminated; }

  // Appends `count` slots (new initial ranks, numbered on from
  // initialWorldSize()) as spares ranked after every live slot: processes
  // that joined the running job in place of ones that left (resilient-run).
  void addSpares(int count);

  // The initial ranks of the live slots, ordered by their current rank.
  std::vector<int> liveByRank() const;
  // Recomputes every activeRank from the modes, in rank order.
  void renumberActive();

  // Empty when the World is consistent: live ranks are exactly 0..worldSize-1,
  // active ranks exactly 0..activeWorldSize-1 in rank order, terminated slots
  // have rank -1. Otherwise what is wrong, for the error message.
  std::string inconsistency() const;

  friend bool operator==(const World& a, const World& b);

 private:
  [[noreturn]] void throwOutOfRange(int initialRank) const;

  std::vector<RankSlot> slots_;
};

bool operator==(const RankSlot& a, const RankSlot& b);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
