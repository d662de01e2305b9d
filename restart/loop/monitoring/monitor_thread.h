// The monitor thread of one iteration (docs/reference/restart-model.md §1.1, MonitorThread,
// plus the plugins' signals): two threads while the iteration runs.
//  - The store watcher blocks in store.wait on the iteration's interruption
//    key (woken by the store, no polling) and raises the interruption when
//    another rank (or a monitor process) published a fault.
//  - The local watcher polls this process's blackbox every `pollInterval`
//    (one atomic load): a plugin fault is published at once as a fault
//    record naming its culprit, which raises the interruption everywhere. It
//    also feeds the progress watchdog (operations completing count as
//    progress) into the monitor status page. Once the interruption is
//    raised it publishes when its abort begins (iteration/<k>/abort/<r>,
//    the culprits' clock), cancels the wrapped function, takes the atomic()
//    lock and runs the abort, then lowers iteration/<k>/first-abort to it.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

#include "restart/loop/interruption.h"
#include "restart/loop/job/rank_registry.h"
#include "restart/loop/monitoring/blackbox_watch.h"
#include "restart/protocol/fault_log.h"
#include "restart/protocol/status_page.h"

namespace resilient::restart {

struct MonitorThreadConfig {
  int iteration = 0;
  int initialRank = 0;
  std::chrono::milliseconds storeWaitChunk{1000};    // monitorThreadInterval (also the
                                                     // bound of the abort-time write)
  std::chrono::milliseconds pollInterval{5};         // blackbox polling
  std::chrono::milliseconds progressInterval{1000};  // progressWatchdogInterval
  // Between two polls of the communicators' asynchronous errors.
  std::chrono::milliseconds asyncErrorInterval{10};
};

// The first asynchronous error among the communicators the user registered
// (ncclCommGetAsyncError of an adopted handle, and the like), described, or
// nullopt while all are healthy.
using AsyncErrorPoll = std::function<std::optional<std::string>()>;

class MonitorThread {
 public:
  // `abort` runs once, on the local watcher thread, with the atomic() lock
  // held; it must not throw. `page` may be null (no monitor process).
  MonitorThread(store::Store& store, const protocol::JobKeys& keys, protocol::FaultLog& faults,
                RankRegistry& registry, BlackboxWatch& blackbox, Interruption& interruption,
                protocol::StatusPage* page, std::recursive_mutex& atomicMutex,
                MonitorThreadConfig config, std::function<void()> abort,
                AsyncErrorPoll asyncErrors = {});
  // Stops both threads (the store watcher may finish its current chunk).
  ~MonitorThread();
  MonitorThread(const MonitorThread&) = delete;
  MonitorThread& operator=(const MonitorThread&) = delete;

 private:
  void watchStore(const std::stop_token& stop);
  void watchLocal(const std::stop_token& stop);
  void publishPluginFault(const resilient_blackbox_fault& fault);
  // Publishes this rank's abort time (wall-clock ns), returned.
  uint64_t publishAbortBegun();
  void lowerFirstAbort(uint64_t abortNs);

  store::Store& store_;
  const protocol::JobKeys& keys_;
  protocol::FaultLog& faults_;
  RankRegistry& registry_;
  BlackboxWatch& blackbox_;
  Interruption& interruption_;
  protocol::StatusPage* page_;
  std::recursive_mutex& atomicMutex_;
  MonitorThreadConfig config_;
  std::function<void()> abort_;
  AsyncErrorPoll asyncErrors_;
  std::jthread storeWatcher_;
  std::jthread localWatcher_;
};

}  // namespace resilient::restart
