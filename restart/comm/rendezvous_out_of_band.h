// The host engine's out-of-band channel (hostengine/rendezvous.h)
// over a restart Rendezvous: each allGather is one round of the
// rendezvous, named "<prefix>/<n>". The engine uses it while it sets up its
// connections (the listen handles); detach() ends that use, since the
// Rendezvous lives only as long as the factory call. Errors become a Status
// (the engine, like all of plugin/, does not use exceptions).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "hostengine/rendezvous.h"
#include "resilient/restart/communicator.hpp"

namespace resilient::restart::comm {

class RendezvousOutOfBand final : public hostengine::OutOfBand {
 public:
  RendezvousOutOfBand(Rendezvous& rendezvous, std::string prefix,
                      std::chrono::milliseconds timeout);

  Result<std::vector<std::string>> allGather(std::string_view mine) override;
  void waiting() noexcept override {
    if (rendezvous_ != nullptr) {
      rendezvous_->waiting();
    }
  }
  // Later calls fail (invalidUsage) instead of touching the rendezvous.
  void detach() noexcept { rendezvous_ = nullptr; }

 private:
  Rendezvous* rendezvous_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  int round_ = 0;
};

}  // namespace resilient::restart::comm
