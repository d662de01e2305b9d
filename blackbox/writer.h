// The writing side of the blackbox (include/resilient/blackbox.h): creates
// or attaches to this process's region, publishes connection snapshots,
// fault records, the profiler's communicator table and flight recorder, and
// exposes the control word the consumers set.
//
// Several Writers of one process (the net plugin's, the profiler's; possibly
// from two different plugin libraries) share one region: the first creates
// it, the others attach, the last to go away removes the file.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/status.h"
#include "resilient/blackbox.h"

namespace resilient::blackbox {

// "<dir>/resilient-blackbox-<pid>"
std::string regionPath(const std::string& dir, uint32_t pid);

// Field 22 of /proc/<pid>/stat (the start time in clock ticks), 0 if unknown.
uint64_t processStartTicks(uint32_t pid);

// The sizes a new region gets (an attached region keeps the ones it has).
struct Layout {
  uint32_t flightOps = 256;  // flight-recorder ring length per communicator slot
  // NCCL_RESILIENT_FLIGHT_RECORDER_OPS.
  static Layout fromParams();
};

// Appends `record` to the fault ring `ring` of the region whose header is
// `header`, numbered and stamped now (any thread of any process attached:
// the number is one atomic increment, the slot then has one writer).
void appendFaultRecord(resilient_blackbox_header& header, resilient_blackbox_fault* ring,
                       resilient_blackbox_fault record) noexcept;

class Writer {
 public:
  // Creates the region in `dir`, or attaches to the one this process already
  // has there (a file of an earlier process with the same pid is removed and
  // created afresh). Never follows a link at the name nor opens a file of
  // another user or with several links (blackbox/region_file.h): refused.
  static Result<std::unique_ptr<Writer>> create(const std::string& dir, const std::string& host);
  static Result<std::unique_ptr<Writer>> create(const std::string& dir, const std::string& host,
                                                const Layout& layout);
  // Unmaps; the last Writer of the process removes the region: the process
  // finished cleanly.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  const std::string& path() const noexcept { return path_; }

  // A free connection slot (-1 when all are taken); the caller serialises claims.
  int claimConnection() noexcept;
  void releaseConnection(int slot) noexcept;
  void writeConnection(int slot, const resilient_blackbox_connection& snapshot) noexcept;

  // Appends a fault record (any thread).
  void recordFault(resilient_blackbox_fault record) noexcept;

  // Communicator table. claimComm takes a free slot, else the finalized one
  // updated longest ago; -1 when every slot is active. Any thread.
  int claimComm() noexcept;
  // One writer per slot at a time (the caller's rule).
  void writeComm(int slot, const resilient_blackbox_comm& comm) noexcept;
  // Entry `index` of slot `slot`'s flight-recorder ring (index % flightOps()).
  // Concurrent callers must use different indices.
  void writeFlight(int slot, uint64_t index, const resilient_blackbox_op& op) noexcept;
  uint32_t flightOps() const noexcept { return header_->flightOps; }

  // The consumers' control word.
  bool failFast() const noexcept {
    return (std::atomic_ref<uint32_t>(header_->control).load(std::memory_order_relaxed) &
            RESILIENT_BLACKBOX_CONTROL_FAIL_FAST) != 0;
  }
  // How many aborts the consumers have begun (RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_*).
  uint32_t abortEpoch() const noexcept {
    return std::atomic_ref<uint32_t>(header_->control).load(std::memory_order_relaxed) >>
           RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_SHIFT;
  }
  void heartbeat(uint64_t monoNs, uint64_t wallNs) noexcept;

 private:
  Writer(std::string path, void* base, size_t size, const struct stat& file);

  std::string path_;
  dev_t device_;  // the region file's identity: the name is removed only if it still is ours
  ino_t inode_;
  void* base_;
  size_t size_;
  resilient_blackbox_header* header_;
  resilient_blackbox_connection* connections_;
  resilient_blackbox_fault* faults_;
  resilient_blackbox_comm* comms_;
  resilient_blackbox_op* flight_;
  std::unique_ptr<bool[]> used_;
};

// Copies text into a fixed char array, always NUL-terminated.
template <size_t N>
void copyText(char (&dst)[N], const std::string& src) noexcept {
  const size_t n = src.size() < N - 1 ? src.size() : N - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}
// The same from a C string (NULL copies as "").
template <size_t N>
void copyText(char (&dst)[N], const char* src) noexcept {
  size_t n = 0;
  if (src != nullptr) {
    while (n < N - 1 && src[n] != '\0') {
      ++n;
    }
    std::memcpy(dst, src, n);
  }
  dst[n] = '\0';
}

}  // namespace resilient::blackbox
