// One page of shared memory between a rank and its monitor process: the rank
// writes its phase, iteration and progress timestamps; the monitor process
// reads them to enforce the soft and hard timeouts (docs/reference/restart-model.md §1.1,
// ProgressWatchdog → MonitorProcess, without a queue or a thread on either
// side). The rank creates it (a memfd) before it spawns the monitor process,
// which inherits the descriptor (`resilient-monitor --status-fd N`).
//
// Timestamps are CLOCK_MONOTONIC nanoseconds (one host, one clock). Every
// field is a lock-free atomic; a field has one writer (the rank) unless said.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "common/file_descriptor.h"

namespace resilient::restart::protocol {

inline constexpr uint32_t kStatusPageMagic = 0x52534d50;  // "PMSR"
inline constexpr uint32_t kStatusPageVersion = 4;  // 2: spare; 3: slots, kJoining; 4: kWithdrawn

enum class RankPhase : uint32_t {
  kStarting = 0,      // before the initial barrier
  kInitialBarrier,    // waiting in the initial barrier
  kRunning,           // in the wrapped function (active) or waiting as a spare
  kRestarting,        // abort, finalize, health check
  kIterationBarrier,  // waiting in the iteration barrier (hard timeout stretched to the barrier
                      // timeout)
  kCompleting,        // in the completion or termination barrier
  kDone,              // left the loop normally: the monitor exits without records
  kFailed,            // left the loop with an error (terminated, discarded, aborted)
  kJoining,           // a process that joined the running job, not admitted yet: its
                      // end is recorded (terminated) and interrupts nobody
  kWithdrawn,         // a joiner whose initial rank is another process's: it leaves,
                      // and the monitor exits without records (restart/loop/job/joiners.h)
};

// The rank left the loop: no timeout or liveness verdict applies to it any more.
inline bool leftTheLoop(RankPhase phase) noexcept {
  return phase == RankPhase::kDone || phase == RankPhase::kFailed ||
         phase == RankPhase::kWithdrawn;
}

const char* rankPhaseName(RankPhase phase) noexcept;

struct StatusPage {
  uint32_t magic;
  uint32_t version;
  std::atomic<int64_t> rankPid;
  std::atomic<int32_t> initialRank;
  std::atomic<int32_t> iteration;
  std::atomic<uint32_t> phase;  // RankPhase
  // Progress seen by the rank's progress watchdog: NCCL operations or
  // network bytes completing (blackbox), or a phase change.
  std::atomic<uint64_t> autoProgressNs;
  // The last CallContext::ping(); 0 until the first one (the manual timeout
  // is armed by the first ping).
  std::atomic<uint64_t> manualPingNs;
  // > 0 while hang protection is disabled (nested guards count).
  std::atomic<uint32_t> hangProtectionOff;
  // Written by the monitor process: its pid, and how many times it enforced
  // the soft timeout (the rank reads it for the timeline).
  std::atomic<int64_t> monitorPid;
  std::atomic<uint32_t> softTimeouts;
  // 1 while the rank is a spare in `iteration`: its death or hard timeout
  // records it and leaves the active ranks alone.
  std::atomic<uint32_t> spare;
  // The slots (initial ranks) of the job's World in `iteration`: the size of
  // its barriers, which grows as processes join (0 while joining).
  std::atomic<int32_t> slots;

  RankPhase currentPhase() const noexcept {
    return static_cast<RankPhase>(phase.load(std::memory_order_acquire));
  }
  // max(autoProgressNs, manualPingNs)
  uint64_t lastProgressNs() const noexcept;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "the status page is shared between processes: its atomics must be lock-free");

// A mapping of the page; unmapped on destruction.
class StatusPageMapping {
 public:
  // The rank's side: a new zeroed page in a memfd (not close-on-exec: the
  // monitor process inherits it). Throws std::system_error.
  static StatusPageMapping create(int initialRank);
  // The monitor's side: maps `fd` and checks magic and version. Throws
  // std::system_error or std::runtime_error naming what is wrong.
  static StatusPageMapping attach(int fd);

  StatusPageMapping(StatusPageMapping&& other) noexcept;
  StatusPageMapping& operator=(StatusPageMapping&&) = delete;
  StatusPageMapping(const StatusPageMapping&) = delete;
  StatusPageMapping& operator=(const StatusPageMapping&) = delete;
  ~StatusPageMapping();

  StatusPage& page() const noexcept { return *page_; }
  int fd() const noexcept { return fd_.get(); }

 private:
  StatusPageMapping(FileDescriptor fd, StatusPage* page) noexcept
      : fd_(std::move(fd)), page_(page) {}
  FileDescriptor fd_;
  StatusPage* page_;
};

}  // namespace resilient::restart::protocol
