// The progress monitor: a connection with requests outstanding on which
// nothing moves -- no request completes, the inner transport moves no byte --
// for NCCL_RESILIENT_PROGRESS_TIMEOUT_MS is "peer stuck"; 0 disables it. (A
// peer that stops answering heartbeats is found sooner, by the liveness
// channel: its timeout is far shorter.)
//
// The data path reads no clock (connection.h): at each tick the monitor
// compares a busy connection's counters with its last look and stamps
// progress (Connection::noteProgress) when its busy period began since then,
// its completed requests grew, or its inner transport moved bytes; so the
// timeout counts from at most one tick after the last progress. Only
// completions make a connection idle, so every busy period after the first
// begins with a stamp: a connection idle for longer than the timeout is not
// stuck once busy again.
//
// Pure: the time and the transport's byte count are arguments, so a test
// drives it with a fake clock. Faults go to a FaultSink.
//
// Threads: the watchdog thread, with the watchdog's mutex held.
#pragma once

#include <cstdint>
#include <optional>

#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"

namespace resilient::net {

class ProgressMonitor {
 public:
  // `timeoutMs` 0: no stuck detection (progress is still stamped, for the
  // fault messages and the blackbox).
  ProgressMonitor(int64_t timeoutMs, FaultSink& sink) : timeoutMs_(timeoutMs), sink_(sink) {}

  int64_t timeoutMs() const noexcept { return timeoutMs_; }

  // A connection with requests outstanding and no fault, at a tick at `now`.
  // `bytesMoved`: the inner transport's count for it (nullopt: the transport
  // cannot tell; completed requests count alone). True when requests
  // completed or bytes moved since the last look (not at the first look).
  bool observe(ConnectionRecord& conn, std::optional<uint64_t> bytesMoved, uint64_t now) noexcept;
  // What the liveness channel knows of the peer: its link is up and it
  // answers heartbeats, or there is no such evidence (no link: the inner
  // transport's handle left no room, or the peer runs without the channel).
  enum class PeerLiveness { kAnswering, kUnknown };
  // After observe(): fails the connection as "peer stuck" if its last
  // progress is older than the timeout. True when it did.
  bool failIfStuck(ConnectionRecord& conn, uint64_t now, PeerLiveness liveness);

 private:
  const int64_t timeoutMs_;
  FaultSink& sink_;
};

}  // namespace resilient::net
