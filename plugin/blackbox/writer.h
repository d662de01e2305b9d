// The writing side of the blackbox (include/resilient/blackbox.h): creates
// and maps this process's region, publishes connection snapshots and fault
// records, and exposes the control word the consumers set.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "plugin/common/status.h"
#include "resilient/blackbox.h"

namespace resilient::blackbox {

// "<dir>/resilient-blackbox-<pid>"
std::string regionPath(const std::string& dir, uint32_t pid);

class Writer {
 public:
  // Creates the region in `dir` (replacing a stale file of the same pid).
  static Result<std::unique_ptr<Writer>> create(const std::string& dir, const std::string& host);
  // Unmaps and removes the region: the process finished cleanly.
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

  // The consumers' control word.
  bool failFast() const noexcept {
    return (std::atomic_ref<uint32_t>(header_->control).load(std::memory_order_relaxed) &
            RESILIENT_BLACKBOX_CONTROL_FAIL_FAST) != 0;
  }
  void heartbeat(uint64_t monoNs, uint64_t wallNs) noexcept;

 private:
  Writer(std::string path, void* base);

  std::string path_;
  void* base_;
  resilient_blackbox_header* header_;
  resilient_blackbox_connection* connections_;
  resilient_blackbox_fault* faults_;
  std::unique_ptr<bool[]> used_;
};

// Copies text into a fixed char array, always NUL-terminated.
template <size_t N>
void copyText(char (&dst)[N], const std::string& src) noexcept {
  const size_t n = src.size() < N - 1 ? src.size() : N - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace resilient::blackbox
