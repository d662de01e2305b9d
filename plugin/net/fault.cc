#include "plugin/net/fault.h"

namespace resilient::net {

const char* faultClassName(FaultClass c) noexcept {
  switch (c) {
    case FaultClass::kTransportError: return "transport error";
    case FaultClass::kPeerExited: return "peer process exited";
    case FaultClass::kPeerUnresponsive: return "peer unresponsive";
    case FaultClass::kPeerStuck: return "peer stuck";
    case FaultClass::kAborted: return "aborted";
    case FaultClass::kLocalError: return "local error";
  }
  return "unknown fault";
}

bool isRemote(FaultClass c) noexcept {
  return c != FaultClass::kAborted && c != FaultClass::kLocalError;
}

}  // namespace resilient::net
