// The job's terminated ranks in the store: marking one is idempotent (the
// first reason stays) and appends it to a list, so that a reader polling the
// set costs one get when nothing changed, whatever the job's size.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "restart/protocol/job_keys.h"
#include "store/store.h"

namespace resilient::restart::protocol {

// Marks `initialRank` terminated with `reason`; true if this call did it
// (false: it already was).
bool markTerminated(store::Store& store, const JobKeys& keys, int initialRank,
                    const std::string& reason, store::Timeout timeout = {});

// A reader of the list that remembers how far it read.
class TerminatedRanks {
 public:
  TerminatedRanks(store::Store& store, const JobKeys& keys) : store_(store), keys_(keys) {}
  // Every rank terminated so far.
  const std::set<int>& refresh(store::Timeout timeout = {});
  const std::set<int>& known() const noexcept { return ranks_; }
  // How often the list was found begun anew (a store restarted empty) since
  // this reader's first read.
  uint64_t restarts() const noexcept { return restarts_; }

 private:
  store::Store& store_;
  const JobKeys& keys_;
  int64_t read_ = 0;                  // entries read
  std::optional<std::string> epoch_;  // of the list read (terminated/epoch)
  bool read_once_ = false;
  uint64_t restarts_ = 0;
  std::set<int> ranks_;
};

}  // namespace resilient::restart::protocol
