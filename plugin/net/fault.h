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
};

const char* faultClassName(FaultClass c) noexcept;
// Peer-side faults are ncclRemoteError; local ones ncclSystemError.
bool isRemote(FaultClass c) noexcept;

struct FaultRecord {
  FaultClass cls = FaultClass::kTransportError;
  Status status;  // what every later call on the connection returns
  uint64_t detectedNs = 0;
  std::string text;  // the full explanation, as logged
};

}  // namespace resilient::net
