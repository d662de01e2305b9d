#include "restart/loop/monitoring/blackbox_watch.h"

#include <unistd.h>

namespace resilient::restart {

BlackboxWatch::BlackboxWatch(const std::string& dir) {
  if (!dir.empty()) {
    path_ = blackbox::resolveRegion(std::to_string(::getpid()), dir);
  }
}

bool BlackboxWatch::attach() {
  if (watch_) {
    return true;
  }
  if (path_.empty()) {
    return false;
  }
  auto opened = blackbox::RegionWatch::open(path_);
  if (!opened.ok()) {
    return false;  // no plugin loaded yet
  }
  watch_.emplace(std::move(opened).value());
  if (skipOnAttach_) {
    seen_ = watch_->faultCount();
  }
  return true;
}

bool BlackboxWatch::attached() {
  std::lock_guard<std::mutex> lock(mutex_);
  return attach();
}

std::vector<resilient_blackbox_fault> BlackboxWatch::newFaults() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<resilient_blackbox_fault> out;
  if (!attach()) {
    skipOnAttach_ = false;  // faults of a region that appears from now on are new
    return out;
  }
  const uint64_t count = watch_->faultCount();
  if (count == seen_) {
    return out;
  }
  // Only the new faults' slots: a fault moves the counter of every rank at a
  // restart, when a whole snapshot per rank competes with the recovery.
  for (const resilient_blackbox_fault& f : watch_->faultsAfter(seen_)) {
    if (f.number <= count && f.faultClass != RESILIENT_BLACKBOX_FAULT_ABORTED &&
        !RESILIENT_BLACKBOX_IS_REPORT(f.faultClass)) {
      out.push_back(f);
    }
  }
  seen_ = count;
  return out;
}

void BlackboxWatch::skipSeen() {
  std::lock_guard<std::mutex> lock(mutex_);
  skipOnAttach_ = true;
  if (attach()) {
    seen_ = watch_->faultCount();
  }
}

uint64_t BlackboxWatch::progressDigest() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!attach()) {
    return 0;
  }
  const blackbox::Snapshot snap = watch_->read({.flight = false, .faults = false});
  uint64_t digest = 0;
  for (const auto& c : snap.connections) {
    digest += c.completedRequests;
  }
  for (const auto& view : snap.comms) {
    digest += view.comm.collCompleted + view.comm.p2pCompleted;
  }
  return digest;
}

std::vector<blackbox::CommView> BlackboxWatch::comms() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!attach()) {
    return {};
  }
  return watch_->read({.flight = false, .connections = false, .faults = false}).comms;
}

std::optional<blackbox::Snapshot> BlackboxWatch::snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!attach()) {
    return std::nullopt;
  }
  return watch_->read();
}

void BlackboxWatch::recordReport(const resilient_blackbox_fault& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (attach()) {
    watch_->recordReport(report);
  }
}

void BlackboxWatch::setFailFast(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!attach()) {
    return;
  }
  if (on) {
    watch_->beginAbort();
  } else {
    watch_->endAbort();
  }
}

}  // namespace resilient::restart
