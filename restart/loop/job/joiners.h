// Processes that join the running job in place of ones that left (started by
// resilient-run with NCCL_RESILIENT_RESTART_JOIN=1; docs/restart.md, "The
// agent"). A joiner takes a new initial rank after the job's others and
// waits; the job's next restart admits every joiner registered by then, as
// spares at the end of the World, before the rank assignment runs (which may
// activate them at once: a lost rank's place is taken in the same restart).
//
// The protocol, under the job's keys:
//   joiners/count            the queue's length: joiner n (1-based) is initial
//                            rank initialWorldSize + n - 1
//   iteration/<k>/verdict    its "joiners": how many iteration k+1's World
//                            holds (restart/loop/loop.h, the restart's verdict)
//   iteration/<k>/world      the World of iteration k, written when joiners
//                            were admitted into it (and the one before it:
//                            a joiner computes nothing of the history)
//   joiners/<n>/admitted     its wake-up: JSON {"iteration": the iteration it
//                            enters, "identity": the process admitted as n}
//   rank/<r>/identity        claimed by the joiner as it registers
//                            (restart/loop/job/rank_registry.h)
//   finished                 set by every rank that completes the job: a
//                            joiner still waiting then has nothing to join
//
// A store that restarted empty gets the queue's length, the identities and
// the latest admission back from the job's ranks (Loop::restoreStore); a
// process that registers before they did may draw a number in use. A joiner
// keeps its number only while its initial rank's registry entry is its own
// (a rank in the World puts its identity back over any claim; a joiner still
// waiting claims, and the first claim on an instance stands), its rank is not
// terminated, and its admission names it; else it withdraws without a record
// and leaves for a new process, which draws a number of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "resilient/restart/world.hpp"
#include "restart/loop/job/rank_registry.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

// A World as the store keeps it (one JSON array of [rank, mode, activeRank]).
std::string worldToText(const World& world);
World worldFromText(std::string_view text);  // throws std::invalid_argument

// This process's place in the queue of joiners.
struct JoinerTicket {
  int64_t number = 0;   // the n of joiners/<n>
  int initialRank = 0;  // initialWorldSize + n - 1, claimed in the registry
};

// Takes the first number past the queue whose initial rank it can claim in
// the registry, and makes the queue that long. A number whose rank another
// process holds (a store that restarted empty before the job's ranks put the
// queue back, a joiner that claimed it a moment before) is theirs.
JoinerTicket registerJoiner(store::Store& store, const protocol::JobKeys& keys,
                            RankRegistry& registry, int initialWorldSize,
                            const RankIdentity& identity);

// Makes joiners/count at least `atLeast` (compare-and-set: never lowers it).
void raiseJoinerCount(store::Store& store, const protocol::JobKeys& keys, int64_t atLeast);

// One admission of joiners (admittedSoFar, total] into iteration `iteration`
// + 1, whose World is `next` (`current`: iteration `iteration`'s): what the
// announcing rank writes, keeps, and puts back after a store restart.
struct Admissions {
  int iteration = 0;
  int64_t admittedSoFar = 0;
  int64_t total = 0;
  World current{1};
  World next{1};
  // Per joiner admitted, the identity (JSON) its initial rank's registry
  // entry held as it was admitted; "" when it held none.
  std::vector<std::string> identities;
};

// Reads the identities of the joiners admitted (the registry's entries).
Admissions admissionsOf(store::Store& store, const protocol::JobKeys& keys, int k,
                        int64_t admittedSoFar, int64_t total, const World& current,
                        const World& next);

// Writes the Worlds, then each joiner's wake-up (joiners/<n>/admitted: the
// iteration it enters and the identity admitted). Idempotent.
void announceAdmissions(store::Store& store, const protocol::JobKeys& keys, const Admissions& a);

// What a joiner learns once admitted.
struct Admission {
  int iteration = 0;  // the first iteration it is part of
  World world{1};     // that iteration's World
  World previous{1};  // the World of the iteration before (for a communicator's grow)
};

// How a joiner's wait ended.
struct JoinerWait {
  enum class End {
    kAdmitted,
    kNotNeeded,  // the job finished first
    // The initial rank is not this process's: another process holds it, or it
    // is terminated (a number drawn twice from a store that restarted empty,
    // or this joiner was declared dead); it leaves for a new process.
    kWithdrawn,
  };
  End end = End::kNotNeeded;
  Admission admission;  // kAdmitted
  std::string why;      // kWithdrawn
};

// Waits for the admission of `ticket` (this process, `identity`), in slices
// of `slice`, checking between them that its initial rank is still its own;
// `progress` runs after each slice.
JoinerWait waitForAdmission(store::Store& store, const protocol::JobKeys& keys,
                            RankRegistry& registry, const JoinerTicket& ticket,
                            const RankIdentity& identity, std::chrono::milliseconds slice,
                            const std::function<void()>& progress);

// How many joiners have registered so far (at least `admittedSoFar`, those
// the current World holds): what the restart's verdict admits.
int64_t registeredJoiners(store::Store& store, const protocol::JobKeys& keys,
                          int64_t admittedSoFar);

}  // namespace resilient::restart
