// The interruption of one iteration: raised once (by a local fault, the
// store's "interrupted" key, a monitor), then the abort runs and the wrapped
// function is cancelled. Shared by the main thread, the monitor thread and
// CallContext; every method is thread-safe. A fault this rank finds itself
// is published and raised in one step (publishAndRaise).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "restart/protocol/fault_log.h"
#include "restart/protocol/fault_record.h"

namespace resilient::restart {

class Interruption {
 public:
  // Raises it; true for the first call (whose reason is kept).
  bool raise(const std::string& reason);
  bool raised() const;
  std::string reason() const;
  // CLOCK_MONOTONIC ns of the first raise (0 if not raised).
  uint64_t raisedNs() const;
  // Waits until raised or `timeout`; true if raised.
  bool waitRaised(std::chrono::milliseconds timeout) const;

  // The abort has begun: the wrapped function's waits now fail.
  void cancel() noexcept;
  bool cancelled() const noexcept;

  // The abort has finished (communicators aborted, user aborts run).
  void markAborted();
  bool waitAborted(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool raised_ = false;
  bool aborted_ = false;
  std::atomic<bool> cancelled_{false};
  std::string reason_;
  uint64_t raisedNs_ = 0;
};

// A fault this rank found (the loop's own, or its plugins'): raises
// `interruption` with the record's description, then publishes `record` to
// the job's fault log, which wakes every rank's monitor thread. A store that
// fails is warned about, not thrown: this rank's interruption (and abort)
// happens all the same.
void publishAndRaise(protocol::FaultLog& faults, const protocol::FaultRecord& record,
                     Interruption& interruption);

}  // namespace resilient::restart
