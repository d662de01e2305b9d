// The host engine's out-of-band channel (hostengine/rendezvous.h)
// over a restart Rendezvous: each allGather is one round of the
// rendezvous, named "<prefix>/<n>"; each exchangeWith is one round too, in
// which every rank publishes "<prefix>/<n>/<its rank>" and looks up its
// peer's (one key read per rank, not one per rank of the round). The engine uses it while it sets up its
// connections (the listen handles); detach() ends that use, since the
// Rendezvous lives only as long as the factory call. Errors become a Status
// (the engine, like all of plugin/, does not use exceptions).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostengine/rendezvous.h"
#include "resilient/restart/communicator.hpp"

namespace resilient::restart::comm {

class RendezvousOutOfBand final : public hostengine::OutOfBand {
 public:
  // `rank`: this process's rank among the rendezvous's members.
  RendezvousOutOfBand(Rendezvous& rendezvous, std::string prefix, int rank,
                      std::chrono::milliseconds timeout);

  Result<std::vector<std::string>> allGather(std::string_view mine) override;
  Result<std::string> exchangeWith(int peer, std::string_view mine) override;
  std::optional<bool> gaveInLastExchange(int rank) override;
  void waiting() noexcept override {
    if (rendezvous_ != nullptr) {
      rendezvous_->waiting();
    }
  }
  // Later calls fail (invalidUsage) instead of touching the rendezvous.
  void detach() noexcept { rendezvous_ = nullptr; }
  // From any thread: a wait under way (and every later one) ends within a
  // slice (kAbortSlice) with an error instead of at its timeout.
  void abort() noexcept { aborted_.store(true, std::memory_order_release); }

 private:
  Rendezvous* rendezvous_;
  std::string prefix_;
  int rank_;
  std::chrono::milliseconds timeout_;
  int round_ = 0;
  std::string lastExchange_;  // the round exchangeWith used last ("<prefix>/<n>/")
  std::atomic<bool> aborted_{false};

  // `call(slice)` until it returns, the timeout passes (its TimeoutError) or
  // the channel is aborted (an error).
  template <typename T, typename Call>
  Result<T> sliced(Call&& call);
};

}  // namespace resilient::restart::comm
