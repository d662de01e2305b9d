// The culprits of an iteration, computed from its fault records the same
// way on every rank.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "restart/protocol/fault_record.h"
#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart {

// When each rank began the iteration's abort (wall-clock ns,
// protocol::JobKeys::abortBegun); a rank absent from it began none.
using AbortTimes = std::map<int, uint64_t>;

// The ranks the records could name as culprits: named by a record that is
// not a RestartAbort's (which stops the job and blames nobody).
std::set<int> namedRanks(const std::vector<protocol::FaultRecord>& records);

// The culprits of one iteration's records, by causality rather than by a
// window of time: rank c is one when a record names it and the fault was
// detected before c began its own abort. An aborting rank closes its
// connections, so its peers' plugins then report it as a dead peer; those
// records are detected after its abort began and name no culprit. A rank
// that never aborted (it died, or hung before its monitor thread ran) is
// named by every record that names it, however late that record was
// published (a loaded host may publish it long after another rank's
// unrelated record). A rank missing from `abortBegun` began no abort: true
// after the iteration barrier (every rank not terminated arrived there, after
// its abort).
std::set<int> culpritsOf(const std::vector<protocol::FaultRecord>& records,
                         const AbortTimes& abortBegun);
// While ranks may still be on their way to the barrier: a rank missing from
// `abortBegun` is named only by a fault detected before `firstAbortNs`, the
// earliest abort known so far (no abort's consequence: e.g. a rank frozen by
// SIGSTOP that its peers found silent); 0: none known, not named.
std::set<int> culpritsOf(const std::vector<protocol::FaultRecord>& records,
                         const AbortTimes& abortBegun, uint64_t firstAbortNs);

// Lowers iteration k's first-abort key to `abortNs` unless it is lower
// already (get, then compare-and-set, again on a lost race).
void lowerFirstAbort(store::Store& store, const protocol::JobKeys& keys, int iteration,
                     uint64_t abortNs, store::Timeout timeout = {});
// The first-abort key of iteration k (0: absent).
uint64_t readFirstAbort(store::Store& store, const protocol::JobKeys& keys, int iteration,
                        store::Timeout timeout = {});

// Reads the abort times of `ranks` in iteration `k` (one multiGet).
AbortTimes readAbortTimes(store::Store& store, const protocol::JobKeys& keys, int iteration,
                          const std::set<int>& ranks, store::Timeout timeout = {});

}  // namespace resilient::restart
