// The net plugin's part of the blackbox (include/resilient/blackbox.h): the
// process heartbeat and one row per open connection (ends, peer process,
// counters, last progress, state), rewritten at every watchdog tick so that
// resilient-inspect and the restart library see the connections as they are.
// Slots are claimed and released by the watchdog as connections come and go.
//
// Threads: the watchdog thread, with the watchdog's mutex held (the blackbox's
// writer is lock-free: one writer per slot).
#pragma once

#include <cstdint>
#include <set>

#include "blackbox/writer.h"
#include "plugin/net/connection.h"

namespace resilient::net {

// `monoNs`, `wallNs`: the watchdog clock's reading for this tick.
void publishConnections(blackbox::Writer& box, const std::set<ConnectionRecord*>& connections,
                        uint64_t monoNs, uint64_t wallNs);

}  // namespace resilient::net
