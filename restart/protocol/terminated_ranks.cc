#include "restart/protocol/terminated_ranks.h"

#include <unistd.h>

#include <optional>
#include <vector>

#include "common/clock.h"

namespace resilient::restart::protocol {

bool markTerminated(store::Store& store, const JobKeys& keys, int initialRank,
                    const std::string& reason, store::Timeout timeout) {
  const store::CasResult cas =
      store.compareSet(keys.terminated(initialRank), std::nullopt, reason, timeout);
  if (!cas.swapped) {
    return false;
  }
  // The list's epoch, once per store instance (after a restart the list is
  // put back from its start, TerminatedRanks::refresh).
  store.compareSet(keys.terminatedEpoch(), std::nullopt,
                   std::to_string(wallClockNs()) + "-" + std::to_string(::getpid()), timeout);
  const int64_t index = store.add(keys.terminatedCount(), 1, timeout);
  store.set(keys.terminatedEntry(index), std::to_string(initialRank), timeout);
  return true;
}

const std::set<int>& TerminatedRanks::refresh(store::Timeout timeout) {
  const auto head = store_.multiGet({keys_.terminatedCount(), keys_.terminatedEpoch()}, timeout);
  const int64_t count = head[0] ? std::stoll(*head[0]) : 0;
  if (read_once_ && (head[1] != epoch_ || count < read_)) {
    ++restarts_;
  }
  read_once_ = true;
  if (head[1] != epoch_ || count < read_) {
    // The store restarted empty and the list is being put back (every rank
    // marks the ranks it knows terminated again), however long it is by now:
    // read it from the start; what was read stays (nobody comes back from
    // terminated).
    read_ = 0;
    epoch_ = head[1];
  }
  if (count <= read_) {
    return ranks_;
  }
  std::vector<std::string> names;
  for (int64_t i = read_ + 1; i <= count; ++i) {
    names.push_back(keys_.terminatedEntry(i));
  }
  const auto values = store_.multiGet(names, timeout);
  int64_t i = read_;
  for (const auto& v : values) {
    if (!v) {
      break;  // its writer is between add and set: read it next time
    }
    ranks_.insert(std::stoi(*v));
    ++i;
  }
  read_ = i;
  return ranks_;
}

}  // namespace resilient::restart::protocol
