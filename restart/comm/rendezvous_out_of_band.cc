#include "restart/comm/rendezvous_out_of_band.h"

#include <exception>
#include <utility>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::comm {

RendezvousOutOfBand::RendezvousOutOfBand(Rendezvous& rendezvous, std::string prefix,
                                         std::chrono::milliseconds timeout)
    : rendezvous_(&rendezvous), prefix_(std::move(prefix)), timeout_(timeout) {}

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

}  // namespace resilient::restart::comm
