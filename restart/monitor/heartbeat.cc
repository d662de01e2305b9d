#include "restart/monitor/heartbeat.h"

#include <time.h>

#include <utility>

namespace resilient::restart::monitor {

Heartbeat::Heartbeat(store::Store& store, std::string key, const HeartbeatOptions& options)
    : store_(store),
      key_(std::move(key)),
      intervalNs_(static_cast<uint64_t>(options.interval.count()) * 1000000),
      ttl_(options.ttl),
      timeout_(options.callTimeout) {}

void Heartbeat::beatIfDue(uint64_t nowMonoNs) {
  if (lastNs_ != 0 && nowMonoNs < lastNs_ + intervalNs_) {
    return;
  }
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t wall =
      static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  store_.setExpiring(key_, std::to_string(wall), ttl_, timeout_);
  lastNs_ = nowMonoNs;
}

void Heartbeat::remove() {
  store_.remove(key_, timeout_);
}

}  // namespace resilient::restart::monitor
