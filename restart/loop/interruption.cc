#include "restart/loop/interruption.h"

#include <exception>

#include "common/clock.h"
#include "common/log.h"

namespace resilient::restart {

bool Interruption::raise(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (raised_) {
      return false;
    }
    raised_ = true;
    reason_ = reason;
    raisedNs_ = monotonicNs();
  }
  changed_.notify_all();
  return true;
}

bool Interruption::raised() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raised_;
}

std::string Interruption::reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

uint64_t Interruption::raisedNs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raisedNs_;
}

bool Interruption::waitRaised(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return raised_; });
}

void Interruption::cancel() noexcept {
  cancelled_.store(true, std::memory_order_release);
}

bool Interruption::cancelled() const noexcept {
  return cancelled_.load(std::memory_order_acquire);
}

void Interruption::markAborted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
}

bool Interruption::waitAborted(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return aborted_; });
}

void publishAndRaise(protocol::FaultLog& faults, const protocol::FaultRecord& record,
                     Interruption& interruption) {
  // Raised here first: published first, this rank's own store watcher could
  // raise it before us with only the reason's name ("a fault was published
  // (communicator)"), and the timeline would not say what this rank found.
  interruption.raise(record.describe());
  try {
    faults.publish(record);
  } catch (const std::exception& e) {
    RES_WARN(log::kRestart, "restart: could not publish %s: %s", record.describe().c_str(),
             e.what());
  }
}

}  // namespace resilient::restart
