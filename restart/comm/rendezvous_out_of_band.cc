#include "restart/comm/rendezvous_out_of_band.h"

#include <exception>
#include <utility>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::comm {

namespace {

// How long one wait of the rendezvous lasts before an abort is looked at.
constexpr std::chrono::milliseconds kAbortSlice{100};

Status abortedStatus() {
  return remoteError("the communicator's creation was aborted (a restart began)");
}

}  // namespace

template <typename T, typename Call>
Result<T> RendezvousOutOfBand::sliced(Call&& call) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    if (aborted_.load(std::memory_order_acquire)) {
      return abortedStatus();
    }
    // Rounded up: the whole wait lasts the timeout, never less (a peer
    // whose own timeout passes first names the missing rank itself).
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const bool last = left <= kAbortSlice;
    try {
      return call(last ? std::max(left, std::chrono::milliseconds(1)) : kAbortSlice);
    } catch (const TimeoutError&) {
      if (last) {
        throw;
      }
    }
  }
}

RendezvousOutOfBand::RendezvousOutOfBand(Rendezvous& rendezvous, std::string prefix, int rank,
                                         std::chrono::milliseconds timeout)
    : rendezvous_(&rendezvous), prefix_(std::move(prefix)), rank_(rank), timeout_(timeout) {}

Result<std::vector<std::string>> RendezvousOutOfBand::allGather(std::string_view mine) {
  if (rendezvous_ == nullptr) {
    return invalidUsage("the out-of-band channel is closed (the communicator is set up)");
  }
  const std::string round = prefix_ + "/" + std::to_string(round_++);
  try {
    // Each slice sets this rank's part again (the same value) and waits.
    return sliced<std::vector<std::string>>([&](std::chrono::milliseconds slice) {
      return rendezvous_->allGather(round, mine, slice);
    });
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
    return sliced<std::string>([&](std::chrono::milliseconds slice) {
      return rendezvous_->lookup(lastExchange_ + std::to_string(peer), slice);
    });
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
