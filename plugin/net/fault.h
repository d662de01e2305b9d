// What went wrong on a connection, as the resilient layer reports it: one
// immutable record per faulted connection, published once and read by the
// data path (test/isend/irecv return its status from then on: sticky).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace resilient::net {

// Values are the blackbox's RESILIENT_BLACKBOX_FAULT_* (6 and 7 are the profiler's).
enum class FaultClass : uint32_t {
  kTransportError,    // the inner transport failed a call (EOF, reset, errno)
  kPeerExited,        // the peer process closed its liveness channel without goodbye
  kPeerUnresponsive,  // no heartbeat answer within the liveness timeout
  kPeerStuck,         // peer alive but no bytes moved within the progress timeout
  kAborted,           // the process-wide fail-fast switch is set
  kLocalError,        // a local failure (our own resources)
  kLinkDown = 8,      // no heartbeat answer and the local interface of the link is down
  kPeerClosed = 9,    // the peer closed its side (goodbye) with requests outstanding to it
};

const char* faultClassName(FaultClass c) noexcept;
// Peer-side faults are ncclRemoteError; local ones ncclSystemError.
bool isRemote(FaultClass c) noexcept;

// The first fault of a cascade, as far as this process knows: the fault of
// the connection's own peer, or, when that peer closed because of a fault it
// had detected, that fault (its goodbye says which, and whose).
struct RootCause {
  FaultClass cls = FaultClass::kTransportError;
  uint32_t pid = 0;    // the culprit process (0: unknown)
  std::string host;    // its host ("" before its hello)
  std::string detail;  // what was seen (the monitor's explanation), short
};

// "<class> of pid <p> on <host>[ (<detail>)]": a root cause, in the words
// every explanation that names one uses.
std::string describe(const RootCause& root);

struct FaultRecord {
  FaultClass cls = FaultClass::kTransportError;
  Status status;  // what every later call on the connection returns
  uint64_t detectedNs = 0;
  std::string text;  // the full explanation, as logged
  RootCause root;    // what a goodbye of ours names when we close because of it
};

}  // namespace resilient::net
