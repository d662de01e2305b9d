// Who is behind: the culprit of a hang that no rank's death explains. When
// a collective hangs, every rank waits inside it except the one that never
// reached it; the profiler's communicator table (blackbox) shows that rank
// with fewer operations enqueued on the communicator than its peers. Each
// rank publishes its counts when it recovers; after the iteration barrier
// every rank reads them all and computes the same answer.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "restart/loop/monitoring/blackbox_watch.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

// Operations enqueued per communicator (commHash → collectives + p2p).
using CommProgress = std::map<uint64_t, uint64_t>;

CommProgress commProgressOf(BlackboxWatch& blackbox);
std::string encodeCommProgress(const CommProgress& progress);
CommProgress decodeCommProgress(const std::string& text);  // throws std::invalid_argument

void publishCommProgress(store::Store& store, const protocol::JobKeys& keys, int iteration,
                         int initialRank, const CommProgress& progress);
// Every listed rank's published counts (ranks that published none are absent).
std::map<int, CommProgress> readCommProgress(store::Store& store, const protocol::JobKeys& keys,
                                             int iteration, const std::vector<int>& ranks);

// The ranks behind on some communicator: fewer operations enqueued than the
// most any rank of it enqueued, while at least two ranks of it agree on
// that most (one rank ahead alone is not evidence against the others).
std::set<int> behindRanks(const std::map<int, CommProgress>& progress);

}  // namespace resilient::restart
