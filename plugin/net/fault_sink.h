// Where the net plugin's monitors report the faults they find: the liveness
// channel (plugin/net/liveness/) and the progress monitor
// (plugin/net/progress_monitor.h) decide that a connection has failed and
// why; the sink publishes and explains it. In the plugin the sink is the Core
// (Core::fail: the sticky fault record, the one WARN, the blackbox record), so
// the monitors include nothing of core.h; tests record what they report.
//
// Threads: called with the watchdog's mutex held, by the watchdog thread (at
// a tick, or when a link breaks) and by the control path (a close or a new
// connection whose frame cannot be sent breaks a link).
#pragma once

#include <optional>
#include <string>

#include "plugin/net/fault.h"

namespace resilient::net {

class ConnectionRecord;

// A fault as a monitor finds it, before the sink explains it: the class and
// the monitor's part of the explanation (the sink adds the connection's ends,
// its outstanding requests and its last progress).
struct Fault {
  FaultClass cls = FaultClass::kTransportError;
  std::string detail;
  // Set when the peer closed because of a fault of its own; unset, the root
  // cause is this fault of the connection's own peer.
  std::optional<RootCause> root = std::nullopt;
};

class FaultSink {
 public:
  virtual ~FaultSink() = default;
  // Publishes `fault` on `conn` unless it has a fault already (the first one
  // wins: a connection fails once).
  virtual void report(ConnectionRecord& conn, const Fault& fault) = 0;
};

}  // namespace resilient::net
