#include "restart/loop/monitoring/monitor_thread.h"

#include <string>
#include <utility>

#include "blackbox/value_names.h"
#include "common/clock.h"
#include "common/log.h"
#include "restart/loop/job/culprits.h"
#include "store/errors.h"

namespace resilient::restart {

using protocol::FaultReason;
using protocol::FaultRecord;

MonitorThread::MonitorThread(store::Store& store, const protocol::JobKeys& keys,
                             protocol::FaultLog& faults, RankRegistry& registry,
                             BlackboxWatch& blackbox, Interruption& interruption,
                             protocol::StatusPage* page, std::recursive_mutex& atomicMutex,
                             MonitorThreadConfig config, std::function<void()> abort,
                             AsyncErrorPoll asyncErrors)
    : store_(store),
      keys_(keys),
      faults_(faults),
      registry_(registry),
      blackbox_(blackbox),
      interruption_(interruption),
      page_(page),
      atomicMutex_(atomicMutex),
      config_(config),
      abort_(std::move(abort)),
      asyncErrors_(std::move(asyncErrors)) {
  storeWatcher_ = std::jthread([this](const std::stop_token& stop) { watchStore(stop); });
  localWatcher_ = std::jthread([this](const std::stop_token& stop) { watchLocal(stop); });
}

MonitorThread::~MonitorThread() {
  localWatcher_.request_stop();
  storeWatcher_.request_stop();
}

void MonitorThread::watchStore(const std::stop_token& stop) {
  const std::string key = keys_.interrupted(config_.iteration);
  while (!stop.stop_requested() && !interruption_.raised()) {
    try {
      store_.wait({key}, config_.storeWaitChunk);
      const std::optional<std::string> reason = store_.get(key);
      interruption_.raise("a fault was published (" + reason.value_or("?") + ")");
      return;
    } catch (const store::TimeoutError&) {
      continue;
    } catch (const std::exception& e) {
      // The store is gone: nothing can be coordinated any more; the loop's
      // next store call reports it.
      interruption_.raise(std::string("the store failed: ") + e.what());
      return;
    }
  }
}

void MonitorThread::publishPluginFault(const resilient_blackbox_fault& f) {
  FaultRecord r;
  r.iteration = config_.iteration;
  r.reporter = config_.initialRank;
  r.subject = config_.initialRank;
  const bool hung = f.faultClass == RESILIENT_BLACKBOX_FAULT_COLL_HUNG ||
                    f.faultClass == RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT;
  r.reason = hung ? FaultReason::kCollectiveHung : FaultReason::kNetFault;
  if (f.peerPid != 0 && f.faultClass != RESILIENT_BLACKBOX_FAULT_ABORTED) {
    // The plugin names the root cause (a survivor two hops away names the
    // process that failed, not the neighbour that told it).
    r.culprit = registry_.find(f.peerHost, f.peerPid);
  } else if (f.faultClass == RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR) {
    r.culprit = config_.initialRank;
  }
  r.detectedNs = f.wallNs;  // the plugin's own clock of the fault
  r.detail = std::string(blackbox::faultClassName(f.faultClass)) + ": " + f.text;
  publishAndRaise(faults_, r, interruption_);
}

uint64_t MonitorThread::publishAbortBegun() {
  const uint64_t now = wallClockNs();
  try {
    store_.set(keys_.abortBegun(config_.iteration, config_.initialRank), std::to_string(now),
               config_.storeWaitChunk);
  } catch (const std::exception& e) {
    // The abort goes on: a store that does not answer coordinates nothing
    // (the loop's next store call reports it).
    RES_WARN(log::kRestart, "restart: could not publish the abort's start: %s", e.what());
  }
  return now;
}

void MonitorThread::lowerFirstAbort(uint64_t abortNs) {
  try {
    restart::lowerFirstAbort(store_, keys_, config_.iteration, abortNs, config_.storeWaitChunk);
  } catch (const std::exception& e) {
    RES_WARN(log::kRestart, "restart: could not publish the first abort: %s", e.what());
  }
}

void MonitorThread::watchLocal(const std::stop_token& stop) {
  uint64_t lastDigest = 0;
  uint64_t nextProgressNs = 0;
  uint64_t nextAsyncPollNs = 0;
  const auto asyncPollNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.asyncErrorInterval).count());
  const auto progressNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(config_.progressInterval).count());
  while (!stop.stop_requested()) {
    if (interruption_.waitRaised(config_.pollInterval)) {
      break;
    }
    for (const resilient_blackbox_fault& f : blackbox_.newFaults()) {
      publishPluginFault(f);
    }
    const uint64_t now = monotonicNs();
    if (asyncErrors_ && now >= nextAsyncPollNs) {
      // A communicator NCCL itself found broken (e.g. the plugin failed one
      // of the user's or torch's communicators): this rank's fault.
      nextAsyncPollNs = now + asyncPollNs;
      if (std::optional<std::string> error = asyncErrors_()) {
        FaultRecord r;
        r.iteration = config_.iteration;
        r.reporter = config_.initialRank;
        r.subject = config_.initialRank;
        r.reason = FaultReason::kCommunicator;
        r.detail = "asynchronous error of " + *error;
        publishAndRaise(faults_, r, interruption_);
        continue;
      }
    }
    if (page_ != nullptr && now >= nextProgressNs) {
      nextProgressNs = now + progressNs;
      const uint64_t digest = blackbox_.progressDigest();
      if (digest != lastDigest) {
        lastDigest = digest;
        page_->autoProgressNs.store(now, std::memory_order_release);
      }
    }
  }
  if (!interruption_.raised()) {
    return;  // the iteration ended without a fault
  }
  // The plugins' record of a fault this rank saw itself is published even
  // when the wrapped function's exception (e.g. a HostCommunicatorError)
  // raised the interruption before the next poll: it names the culprit (the
  // peer of a liveness fault). Read once, before the abort's own consequences.
  for (const resilient_blackbox_fault& f : blackbox_.newFaults()) {
    publishPluginFault(f);
  }
  // No window for concurrent faults: the abort starts now, and a fault that
  // arrives later still joins this iteration's recovery (its record is read
  // after the iteration barrier). What keeps the abort's own consequences
  // (peers seeing this rank's connections close) from naming this rank a
  // culprit is its abort time, published before anything is closed
  // (restart/loop/job/culprits.h).
  const uint64_t abortNs = publishAbortBegun();
  interruption_.cancel();
  {
    std::lock_guard<std::recursive_mutex> lock(atomicMutex_);
    abort_();
  }
  // After the abort (off its path) and before this rank can arrive at the
  // iteration barrier (tearDown waits for markAborted).
  lowerFirstAbort(abortNs);
  interruption_.markAborted();
}

}  // namespace resilient::restart
