#include "restart/comm/rendezvous_out_of_band.h"

#include <exception>
#include <utility>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::comm {

RendezvousOutOfBand::RendezvousOutOfBand(Rendezvous& rendezvous, std::string prefix, int rank,
                                         std::chrono::milliseconds timeout)
    : rendezvous_(&rendezvous), prefix_(std::move(prefix)), rank_(rank), timeout_(timeout) {}

Result<std::vector<std::string>> RendezvousOutOfBand::allGather(std::string_view mine) {
  if (rendezvous_ == nullptr) {
    return invalidUsage("the out-of-band channel is closed (the communicator is set up)");
  }
  const std::string round = prefix_ + "/" + std::to_string(round_++);
  try {
    return rendezvous_->allGather(round, mine, timeout_);
  } catch (const TimeoutError& e) {
    return timeoutError(e.what());
  } catch (const std::exception& e) {
    return remoteError(std::string("rendezvous: ") + e.what());
  }
}

Result<std::string> RendezvousOutOfBand::exchangeWith(int peer, std::string_view mine) {
  if (rendezvous_ == nullptr) {
    return invalidUsage("the out-of-band channel is closed (the communicator is set up)");
  }
  lastExchange_ = prefix_ + "/" + std::to_string(round_++) + "/";
  try {
    rendezvous_->publish(lastExchange_ + std::to_string(rank_), mine);
  } catch (const std::exception& e) {
    return remoteError(std::string("rendezvous: ") + e.what());
  }
  try {
    return rendezvous_->lookup(lastExchange_ + std::to_string(peer), timeout_);
  } catch (const TimeoutError& e) {
    return timeoutError("rank " + std::to_string(peer) + " gave nothing to exchange within " +
                        std::to_string(timeout_.count()) + " ms; missing ranks: " +
                        std::to_string(peer) + " (" + e.what() + ")");
  } catch (const std::exception& e) {
    return remoteError(std::string("rendezvous: ") + e.what());
  }
}

std::optional<bool> RendezvousOutOfBand::gaveInLastExchange(int rank) {
  if (rendezvous_ == nullptr || lastExchange_.empty()) {
    return std::nullopt;
  }
  try {
    // The shortest wait a lookup takes: present now, or not.
    (void)rendezvous_->lookup(lastExchange_ + std::to_string(rank), std::chrono::milliseconds(1));
    return true;
  } catch (const TimeoutError&) {
    return false;
  } catch (const std::exception&) {
    return std::nullopt;  // the store cannot tell us now
  }
}

}  // namespace resilient::restart::comm
