#include "blackbox/fault_names.h"

#include "resilient/blackbox.h"

namespace resilient::blackbox {

const char* faultClassName(uint32_t faultClass) noexcept {
  switch (faultClass) {
    case RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR: return "transport error";
    case RESILIENT_BLACKBOX_FAULT_PEER_EXITED: return "peer process exited";
    case RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE: return "peer unresponsive";
    case RESILIENT_BLACKBOX_FAULT_PEER_STUCK: return "peer stuck";
    case RESILIENT_BLACKBOX_FAULT_ABORTED: return "aborted";
    case RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR: return "local error";
    case RESILIENT_BLACKBOX_FAULT_COLL_HUNG: return "collective hung";
    case RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT: return "progress silent";
    case RESILIENT_BLACKBOX_FAULT_LINK_DOWN: return "link down";
    default: return "unknown fault";
  }
}

}  // namespace resilient::blackbox
