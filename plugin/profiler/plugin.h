// The profiler plugin's process-wide state: options, blackbox, tracker, hang
// detector and the one background thread that runs the detector.
//
// Lifetime: created by the first successful init (never at load time), kept
// while a communicator uses it, destroyed (thread stopped and joined, blackbox
// detached) by the last finalize, or when the library is unloaded without
// one. A later init creates it afresh, as NCCL may dlclose and re-dlopen us.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "nccl/log.h"
#include "blackbox/writer.h"
#include "common/status.h"
#include "plugin/profiler/clock.h"
#include "plugin/profiler/hang_detector.h"
#include "plugin/profiler/tracker.h"

namespace resilient::profiler {

struct PluginOptions {
  bool enabled = true;             // NCCL_RESILIENT_PROFILER
  int64_t collTimeoutMs = 300000;  // NCCL_RESILIENT_COLL_TIMEOUT_MS (0: no detection)
  TrackerOptions tracker;          // NCCL_RESILIENT_PROFILER_OPS, _PROXY_STEPS
  std::string blackboxDir;         // NCCL_RESILIENT_BLACKBOX_DIR (empty: none)
  uint32_t flightOps = 256;        // NCCL_RESILIENT_FLIGHT_RECORDER_OPS
  std::string host;                // for a blackbox this plugin creates

  // From the NCCL_RESILIENT_* registry (Params::global()).
  static PluginOptions fromParams();
};

// What a Plugin is built from. Unset pointers get the production parts; tests
// inject a fake clock, an observer of the faults and no thread (they scan by
// hand).
struct PluginParts {
  PluginOptions options;
  const Clock* clock = nullptr;   // default: SystemClock
  FaultSink* observer = nullptr;  // also gets every fault, after the WARN and the blackbox
  bool backgroundThread = true;
};

namespace detail {
// The live plugin's tracker (null while there is none, or it is disabled):
// what the hot path reads, one load, no call.
inline std::atomic<Tracker*> gLiveTracker{nullptr};
}  // namespace detail

class Plugin {
 public:
  explicit Plugin(const PluginParts& parts);  // control path; may throw
  ~Plugin();                                  // stops the thread first
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // The process-wide plugin, acquired by init (`logger` may be null: v1-v3),
  // released by finalize. acquire returns nullptr, with *error set, when the
  // plugin cannot be built.
  static Plugin* acquire(ncclDebugLogger_t logger, Status* error);
  static void release(Plugin* plugin) noexcept;
  // The plugin for stopEvent/recordEventState, which get no context.
  static Plugin* live() noexcept;
  // Tests: the parts the next acquire builds the plugin from (nullopt: the
  // production parts from the registry). Only while no plugin is alive.
  static void setPartsForTesting(std::optional<PluginParts> parts);

  bool enabled() const noexcept { return options_.enabled; }
  const PluginOptions& options() const noexcept { return options_; }
  Tracker& tracker() noexcept { return *tracker_; }
  HangDetector& detector() noexcept { return *detector_; }
  blackbox::Writer* blackbox() noexcept { return box_.get(); }

 private:
  friend void releaseAllOnUnload() noexcept;
  void run(const std::stop_token& stop);

  const PluginOptions options_;
  std::unique_ptr<Clock> ownClock_;
  const Clock* clock_;
  std::unique_ptr<blackbox::Writer> box_;
  std::unique_ptr<FaultSink> sink_;
  std::unique_ptr<Tracker> tracker_;
  std::unique_ptr<HangDetector> detector_;
  std::mutex waitMutex_;
  std::condition_variable_any wake_;
  int refs_ = 0;         // guarded by the global plugin mutex
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

// Destroys the plugin if the library goes away while it is alive.
void releaseAllOnUnload() noexcept;

}  // namespace resilient::profiler
