// The hang detector: a periodic scan of every tracked operation, driven by
// the plugin's background thread (or by a test with a fake clock).
//
// It never relies on an event arriving: the proxy progress thread emits
// every kernel-channel and proxy event, and a net error kills that thread
// (docs/reference/nccl-abi.md §0.1.4), so silence is the signal. Each scan compares each
// operation's progress counter with the last scan's; the time of the last
// change is the operation's last progress, to the scan interval. Then, per
// communicator:
//  - hung collective: an operation whose kernels (v1, v2: proxy ops) started,
//    not complete, without progress for the timeout. The oldest such
//    operation is reported once, with the channels that started and did not
//    finish; the others waiting behind it are covered by that report.
//  - silent progress: operations enqueued, none started, and not a single
//    proxy-thread event on the communicator for the timeout (the progress
//    thread died, or the GPU never reached the kernels). Reported once per
//    silent stretch, and only when no hung operation covers it.
//  Silent progress needs kernel-channel events (profiler v3+): with v1, v2
//  an operation without network work never has a child event, so the scan
//  instead retires such operations kChildlessRetireNs after their enqueue.
// After the checks the scan publishes the communicator's slot in the
// blackbox (counters, operations in flight, the oldest one).
#pragma once

#include <cstdint>
#include <string>

#include "plugin/profiler/op_slot.h"
#include "plugin/profiler/tracker.h"
#include "resilient/blackbox.h"

namespace resilient::profiler {

// What a fault names. `text` is the one-line explanation (also the WARN).
struct HangFault {
  uint32_t faultClass = 0;  // RESILIENT_BLACKBOX_FAULT_COLL_HUNG / _PROGRESS_SILENT
  uint64_t commHash = 0;
  int rank = -1;
  int nranks = 0;
  std::string commName;
  OpInfo op;                   // the operation concerned
  uint64_t stuckChannels = 0;  // started and not finished
  uint64_t stalledNs = 0;      // since the last progress seen
  uint64_t detectedMonoNs = 0;
  std::string text;
};

// Where faults go: the blackbox and a WARN in production, a list in tests.
class FaultSink {
 public:
  virtual ~FaultSink() = default;
  virtual void report(const HangFault& fault) noexcept = 0;
};

class HangDetector {
 public:
  // v1, v2: an enqueued operation with no child event this long after the
  // detector first saw it is taken to have had no proxy work.
  static constexpr uint64_t kChildlessRetireNs = 1000000000;

  // timeoutNs == 0: no detection, the scan only publishes.
  HangDetector(Tracker& tracker, uint64_t timeoutNs, FaultSink& sink);

  // One pass at time `nowNs` (the tracker's clock). Not reentrant: one
  // caller (the plugin's thread, or a test).
  void scan(uint64_t nowNs) noexcept;

  uint64_t timeoutNs() const noexcept { return timeoutNs_; }
  // How often to scan: fine enough that a hang is reported within the
  // timeout plus at most twice this interval (<= 100 ms).
  uint64_t intervalNs() const noexcept;

 private:
  // What report() says of a stalled operation.
  struct Stall {
    uint64_t stuckChannels = 0;  // bit c: channel c started and not finished
    uint64_t stalledNs = 0;      // since the operation last moved
    uint64_t commSilentNs = 0;   // since the communicator last moved
    uint64_t nowNs = 0;
  };

  void scanContext(Context& ctx, uint64_t nowNs) noexcept;
  void report(Context& ctx, uint32_t faultClass, const OpSlot& op, const OpInfo& info,
              const Stall& stall) noexcept;

  Tracker& tracker_;
  const uint64_t timeoutNs_;
  FaultSink& sink_;
};

}  // namespace resilient::profiler
