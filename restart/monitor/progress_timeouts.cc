#include "restart/monitor/progress_timeouts.h"

#include <algorithm>

namespace resilient::restart::monitor {

using protocol::RankPhase;

namespace {

uint64_t toNs(std::chrono::milliseconds ms) {
  return static_cast<uint64_t>(ms.count()) * 1000000;
}

bool inBarrier(RankPhase phase) {
  return phase == RankPhase::kInitialBarrier || phase == RankPhase::kIterationBarrier ||
         phase == RankPhase::kCompleting;
}

}  // namespace

ProgressView ProgressView::of(const protocol::StatusPage& page) noexcept {
  ProgressView v;
  v.phase = page.currentPhase();
  v.iteration = page.iteration.load(std::memory_order_acquire);
  v.lastProgressNs = page.lastProgressNs();
  v.hangProtectionOff = page.hangProtectionOff.load(std::memory_order_acquire) > 0;
  return v;
}

ProgressTimeouts::ProgressTimeouts(std::chrono::milliseconds soft, std::chrono::milliseconds hard,
                                   std::chrono::milliseconds barrier, uint64_t startMonoNs)
    : softNs_(toNs(soft)),
      hardNs_(toNs(hard)),
      barrierNs_(toNs(barrier)),
      baselineNs_(startMonoNs) {}

uint64_t ProgressTimeouts::idleNs(const ProgressView& view, uint64_t nowMonoNs) const noexcept {
  const uint64_t since = std::max(view.lastProgressNs, baselineNs_);
  return nowMonoNs > since ? nowMonoNs - since : 0;
}

uint64_t ProgressTimeouts::hardLimitNs(RankPhase phase) const noexcept {
  return inBarrier(phase) ? barrierNs_ : hardNs_;
}

TimeoutAction ProgressTimeouts::check(const ProgressView& view, uint64_t nowMonoNs) {
  if (protocol::leftTheLoop(view.phase)) {
    return TimeoutAction::kNone;
  }
  if (view.hangProtectionOff) {
    baselineNs_ = std::max(baselineNs_, nowMonoNs);
    return TimeoutAction::kNone;
  }
  const uint64_t idle = idleNs(view, nowMonoNs);
  if (idle >= hardLimitNs(view.phase)) {
    return TimeoutAction::kHard;
  }
  if (view.phase == RankPhase::kRunning && idle >= softNs_ && softIteration_ != view.iteration) {
    return TimeoutAction::kSoft;
  }
  return TimeoutAction::kNone;
}

}  // namespace resilient::restart::monitor
