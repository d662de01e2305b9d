// Processes that join the running job in place of ones that left (started by
// resilient-run with NCCL_RESILIENT_RESTART_JOIN=1; docs/restart.md, "The
// agent"). A joiner takes a new initial rank after the job's others and
// waits; the job's next restart admits every joiner registered by then, as
// spares at the end of the World, before the rank assignment runs (which may
// activate them at once: a lost rank's place is taken in the same restart).
//
// The protocol, under the job's keys:
//   joiners/count            counter: the n-th joiner (1-based) gets initial
//                            rank initialWorldSize + n - 1
//   iteration/<k>/verdict    its "joiners": how many iteration k+1's World
//                            holds (restart/loop/loop.h, the restart's verdict)
//   iteration/<k>/world      the World of iteration k, written when joiners
//                            were admitted into it (and the one before it:
//                            a joiner computes nothing of the history)
//   joiners/<n>/admitted     the iteration joiner n enters (its wake-up)
//   finished                 set by every rank that completes the job: a
//                            joiner still waiting then has nothing to join
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "resilient/restart/world.hpp"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

// A World as the store keeps it (one JSON array of [rank, mode, activeRank]).
std::string worldToText(const World& world);
World worldFromText(std::string_view text);  // throws std::invalid_argument

// This process's place in the queue of joiners (the n of joiners/<n>).
int64_t registerJoiner(store::Store& store, const protocol::JobKeys& keys);

// What a joiner learns once admitted.
struct Admission {
  int iteration = 0;  // the first iteration it is part of
  World world{1};     // that iteration's World
  World previous{1};  // the World of the iteration before (for a communicator's grow)
};

// Waits for joiner `index`'s admission, in slices of `slice`; `stop` is asked
// between them (true: give up). nullopt when the job finished first or `stop`
// said so.
std::optional<Admission> waitForAdmission(store::Store& store, const protocol::JobKeys& keys,
                                          int64_t index, std::chrono::milliseconds slice,
                                          const std::function<bool()>& stop);

// How many joiners have registered so far (at least `admittedSoFar`, those
// the current World holds): what the restart's verdict admits.
int64_t registeredJoiners(store::Store& store, const protocol::JobKeys& keys,
                          int64_t admittedSoFar);

// Tells joiners (admittedSoFar, total] that they are in iteration k+1, whose
// World is `next` (`current`: iteration k's). Idempotent.
void announceAdmissions(store::Store& store, const protocol::JobKeys& keys, int k,
                        int64_t admittedSoFar, int64_t total, const World& current,
                        const World& next);

}  // namespace resilient::restart
