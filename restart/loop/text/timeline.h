// The rank's timeline (public type in resilient/restart/timeline.hpp):
// appended by the main thread and the monitor thread, read after run().
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "resilient/restart/timeline.hpp"

namespace resilient::restart {

class Timeline {
 public:
  void record(int iteration, std::string phase, std::string detail = {});
  // Records with a time taken earlier (CLOCK_MONOTONIC ns).
  void recordAt(uint64_t monoNs, int iteration, std::string phase, std::string detail = {});
  std::vector<TimelineEvent> events() const;

 private:
  mutable std::mutex mutex_;
  std::vector<TimelineEvent> events_;
};

}  // namespace resilient::restart
