// StoreRendezvous: the Rendezvous of one iteration (communicator.hpp) over
// the job's coordination store, already narrowed to the iteration's prefix
// (a store::PrefixView such as "iter/7/"), so that one iteration never reads
// another's ids.
//
// Keys under that prefix:
//   publish/<key>          publish() / lookup()
//   gather/<round>/<rank>  allGather(): every member sets its own, waits
//                          (woken by the store, no polling) until all
//                          members' keys exist, then reads them in one
//                          multiGet, in rank order.
// A deadline that passes throws restart::TimeoutError naming the key, or the
// ranks whose contributions are missing; any other store failure throws
// RestartError with the store's message. Thread-safe (as the store is).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "resilient/restart/communicator.hpp"
#include "store/store.h"

namespace resilient::restart::comm {

class StoreRendezvous final : public Rendezvous {
 public:
  // `rank` in [0, members): this process's rank among the members (the
  // iteration's active rank). Throws InternalError otherwise.
  StoreRendezvous(std::shared_ptr<store::Store> iterationStore, int rank, int members);

  void publish(std::string_view key, std::string_view value) override;
  std::string lookup(std::string_view key, std::chrono::milliseconds timeout) override;
  std::vector<std::string> allGather(std::string_view round, std::string_view mine,
                                     std::chrono::milliseconds timeout) override;

  int rank() const noexcept { return rank_; }
  int members() const noexcept { return members_; }

  // The keys used (for tests and for log lines).
  static std::string publishKey(std::string_view key);
  static std::string gatherKey(std::string_view round, int rank);

 private:
  std::shared_ptr<store::Store> store_;
  int rank_;
  int members_;
};

}  // namespace resilient::restart::comm
