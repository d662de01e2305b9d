#include "plugin/net/fault.h"

#include "blackbox/value_names.h"
#include "resilient/blackbox.h"

namespace resilient::net {

// The blackbox records FaultClass by value.
static_assert(static_cast<uint32_t>(FaultClass::kTransportError) ==
              RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR);
static_assert(static_cast<uint32_t>(FaultClass::kPeerExited) ==
              RESILIENT_BLACKBOX_FAULT_PEER_EXITED);
static_assert(static_cast<uint32_t>(FaultClass::kPeerUnresponsive) ==
              RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE);
static_assert(static_cast<uint32_t>(FaultClass::kPeerStuck) == RESILIENT_BLACKBOX_FAULT_PEER_STUCK);
static_assert(static_cast<uint32_t>(FaultClass::kAborted) == RESILIENT_BLACKBOX_FAULT_ABORTED);
static_assert(static_cast<uint32_t>(FaultClass::kLocalError) ==
              RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR);
static_assert(static_cast<uint32_t>(FaultClass::kLinkDown) == RESILIENT_BLACKBOX_FAULT_LINK_DOWN);
static_assert(static_cast<uint32_t>(FaultClass::kPeerClosed) ==
              RESILIENT_BLACKBOX_FAULT_PEER_CLOSED);

const char* faultClassName(FaultClass c) noexcept {
  return blackbox::faultClassName(static_cast<uint32_t>(c));
}

std::string describe(const RootCause& root) {
  std::string text = faultClassName(root.cls);
  text += " of pid " + std::to_string(root.pid) + " on " + (root.host.empty() ? "?" : root.host);
  if (!root.detail.empty()) {
    text += " (" + root.detail + ")";
  }
  return text;
}

bool isRemote(FaultClass c) noexcept {
  return c != FaultClass::kAborted && c != FaultClass::kLocalError;
}

}  // namespace resilient::net
