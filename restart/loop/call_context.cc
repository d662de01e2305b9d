// CallContext and Wrapper (wrapper.hpp): thin forwards to the Loop.
#include "resilient/restart/wrapper.hpp"
#include "restart/comm/collective_arrivals.h"
#include "restart/loop/loop.h"

namespace resilient::restart {

void CallContext::ping() noexcept {
  loop_.ping();
}

CallContext::HangProtectionOff::~HangProtectionOff() {
  if (ctx_ != nullptr) {
    ctx_->loop_.hangProtection(false);
  }
}

CallContext::HangProtectionOff CallContext::disableHangProtection() noexcept {
  loop_.hangProtection(true);
  return HangProtectionOff(this);
}

void CallContext::enterCollective(const std::string& group, const std::string& function, int rank,
                                  int nranks) {
  CollectiveArrivals::process().enter(group, function, rank, nranks);
}

void CallContext::leaveCollective(const std::string& group) {
  CollectiveArrivals::process().leave(group);
}

void CallContext::hangProtectionOff() noexcept {
  loop_.hangProtection(true);
}

void CallContext::hangProtectionOn() noexcept {
  loop_.hangProtection(false);
}

bool CallContext::cancelled() const noexcept {
  return loop_.cancelled();
}

void CallContext::checkCancelled() const {
  if (loop_.cancelled()) {
    throw RankShouldRestart("a restart is under way (iteration " +
                            std::to_string(state_.iteration) + ")");
  }
}

Communicator* CallContext::communicator(const std::string& name) const {
  return loop_.communicator(name);
}

Communicator* CallContext::communicator() const {
  return loop_.onlyCommunicator();
}

void CallContext::registerCommunicator(CommunicatorPtr comm) {
  loop_.registerCommunicator(std::move(comm));
}

Rendezvous& CallContext::rendezvous() const {
  return loop_.rendezvous();
}

std::recursive_mutex& CallContext::atomicMutex() const noexcept {
  return loop_.atomicMutex();
}

Wrapper::Wrapper(Options options) : loop_(std::make_unique<Loop>(std::move(options))) {}

Wrapper::~Wrapper() = default;

void Wrapper::run(const std::function<void(CallContext&)>& fn) {
  loop_->run(fn);
}

const State& Wrapper::state() const noexcept {
  return loop_->state();
}

std::vector<TimelineEvent> Wrapper::timeline() const {
  return loop_->timeline();
}

}  // namespace resilient::restart
