// Restart storms (Options::stormLimit): a fault that recurs in every
// iteration must not restart the job a thousand times. The policy counts the
// restarts within a sliding window: the first restart goes at once, each
// further one waits a back-off that doubles (Options::restartBackoff, at most
// restartBackoffMax), and the restart past the limit ends the job with one
// terminal error that names the recurring fault and how often it recurred.
//
// Pure: the loop gives it each restart's time and fault records, takes its
// verdict to the store (one decision for every rank) and does the waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "restart/protocol/fault_record.h"

namespace resilient::restart {

struct StormPolicy {
  int limit = 10;  // restarts within the window; 0: no limit
  std::chrono::milliseconds window{600000};
  std::chrono::milliseconds backoff{100};
  std::chrono::milliseconds backoffMax{10000};
};

class RestartStorm {
 public:
  explicit RestartStorm(const StormPolicy& policy) : policy_(policy) {}

  struct Verdict {
    bool stop = false;
    std::string message;                // stop: the terminal error's text
    std::chrono::milliseconds backoff{0};  // go on: wait this long first
    int inWindow = 0;                   // restarts within the window, this one included
  };
  // The restart after iteration `iteration` at `nowMs` (a monotonic clock in
  // ms), whose fault records are `records` (the first is the root).
  Verdict restart(int iteration, int64_t nowMs, const std::vector<protocol::FaultRecord>& records);
  // A restart of the job before this process joined it (oldest first), so
  // that a process that joined judges a storm as the job's others do.
  void remember(int iteration, int64_t atMs, const std::vector<protocol::FaultRecord>& records);

 private:
  struct Restart {
    int iteration;
    int64_t atMs;
    std::string kind;  // what recurs: the root record's reason and ranks
    std::string text;  // how it reads
  };
  StormPolicy policy_;
  std::deque<Restart> recent_;
};

}  // namespace resilient::restart
