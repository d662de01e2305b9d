// The rank's heartbeat: heartbeat/<r> = wall-clock ns, written with an
// expiry of the heartbeat timeout every heartbeat interval, so the key
// disappears when the monitor (and with it, normally, the node) is gone.
// Sibling monitors read it (sibling_monitor.h).
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace resilient::restart::monitor {

struct HeartbeatOptions {
  store::Millis interval{0};  // between two refreshes
  store::Millis ttl{0};       // the key's expiry
  store::Timeout callTimeout{};
};

class Heartbeat {
 public:
  Heartbeat(store::Store& store, std::string key, const HeartbeatOptions& options);

  // Refreshes the key when an interval has passed since the last refresh
  // (at once the first time). Throws store::StoreError.
  void beatIfDue(uint64_t nowMonoNs);
  // The monotonic time the next refresh is due.
  uint64_t nextDueNs() const noexcept { return lastNs_ == 0 ? 0 : lastNs_ + intervalNs_; }
  // Removes the key (clean exit). Throws store::StoreError.
  void remove();

 private:
  store::Store& store_;
  std::string key_;
  uint64_t intervalNs_;
  store::Millis ttl_;
  store::Timeout timeout_;
  uint64_t lastNs_ = 0;
};

}  // namespace resilient::restart::monitor
