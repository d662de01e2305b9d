#include "restart/monitor/sibling_monitor.h"

#include <string>

namespace resilient::restart::monitor {

SiblingMonitor::SiblingMonitor(store::Store& store, const protocol::JobKeys& keys,
                               const SiblingMonitorOptions& options)
    : store_(store),
      keys_(keys),
      self_(options.self),
      worldSize_(options.worldSize),
      heartbeatTimeoutNs_(static_cast<uint64_t>(options.heartbeatTimeout.count()) * 1000000),
      timeout_(options.callTimeout),
      storeRestarts_(options.storeRestarts),
      slots_(options.slots),
      sinceNs_(static_cast<size_t>(worldSize_), options.startMonoNs),
      seen_(static_cast<size_t>(worldSize_), false),
      terminated_(static_cast<size_t>(worldSize_), false),
      watched_(worldSize_ > 1 ? (self_ + 1) % worldSize_ : -1) {}

bool SiblingMonitor::countsAsMissing(int rank, uint64_t nowMonoNs) const {
  return seen_[static_cast<size_t>(rank)] ||
         nowMonoNs >= sinceNs_[static_cast<size_t>(rank)] + heartbeatTimeoutNs_;
}

void SiblingMonitor::grow(uint64_t nowMonoNs) {
  const int slots = slots_ != nullptr ? slots_->load(std::memory_order_acquire) : 0;
  if (slots <= worldSize_) {
    return;
  }
  worldSize_ = slots;
  seen_.resize(static_cast<size_t>(slots), false);
  terminated_.resize(static_cast<size_t>(slots), false);
  sinceNs_.resize(static_cast<size_t>(slots), nowMonoNs);
  // The ring is longer: watch the next rank in it again (a sweep moves the
  // watch on past a terminated one).
  watched_ = (self_ + 1) % worldSize_;
}

int SiblingMonitor::nextAlive(const std::vector<bool>& out) const {
  for (int step = 1; step < worldSize_; ++step) {
    const int r = (self_ + step) % worldSize_;
    if (!out[static_cast<size_t>(r)]) {
      return r;
    }
  }
  return -1;
}

bool SiblingMonitor::storeRestarted(uint64_t nowMonoNs) {
  if (storeRestarts_ == nullptr) {
    return false;
  }
  const uint64_t restarts = storeRestarts_->load(std::memory_order_acquire);
  if (restarts == restartsSeen_) {
    return false;
  }
  // The store came back empty: every heartbeat is missing until its monitor
  // beats again, as when this monitor started.
  restartsSeen_ = restarts;
  sinceNs_.assign(sinceNs_.size(), nowMonoNs);
  seen_.assign(seen_.size(), false);
  return true;
}

std::vector<int> SiblingMonitor::check(uint64_t nowMonoNs) {
  grow(nowMonoNs);
  if (watched_ < 0) {
    return {};
  }
  storeRestarted(nowMonoNs);
  if (store_.get(keys_.heartbeat(watched_), timeout_).has_value()) {
    seen_[static_cast<size_t>(watched_)] = true;
    return {};
  }
  // The get may be what found the restarted store (its client reconnected
  // within it): then the missing heartbeat says nothing.
  if (storeRestarted(nowMonoNs) || !countsAsMissing(watched_, nowMonoNs)) {
    return {};
  }
  std::vector<int> missing = sweep(nowMonoNs);
  if (storeRestarted(nowMonoNs)) {
    return {};
  }
  return missing;
}

std::vector<int> SiblingMonitor::sweep(uint64_t nowMonoNs) {
  std::vector<std::string> keys;
  keys.reserve(2 * static_cast<size_t>(worldSize_));
  for (int r = 0; r < worldSize_; ++r) {
    keys.push_back(keys_.heartbeat(r));
  }
  for (int r = 0; r < worldSize_; ++r) {
    keys.push_back(keys_.terminated(r));
  }
  const auto values = store_.multiGet(keys, timeout_);
  std::vector<int> missing;
  std::vector<bool> out(static_cast<size_t>(worldSize_), false);
  for (int r = 0; r < worldSize_; ++r) {
    const auto i = static_cast<size_t>(r);
    const bool beating = values[i].has_value();
    terminated_[i] = values[static_cast<size_t>(worldSize_) + i].has_value();
    if (beating) {
      seen_[i] = true;
    }
    if (r != self_ && !beating && !terminated_[i] && countsAsMissing(r, nowMonoNs)) {
      missing.push_back(r);
    }
    out[i] = r == self_ || terminated_[i] || (!beating && countsAsMissing(r, nowMonoNs));
  }
  watched_ = nextAlive(out);
  return missing;
}

}  // namespace resilient::restart::monitor
