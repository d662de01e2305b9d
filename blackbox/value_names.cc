#include "blackbox/value_names.h"

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
    case RESILIENT_BLACKBOX_FAULT_PEER_CLOSED: return "peer closed";
    case RESILIENT_BLACKBOX_FAULT_SLOW_LINK: return "slow link";
    case RESILIENT_BLACKBOX_FAULT_STRAGGLER: return "straggler";
    case RESILIENT_BLACKBOX_FAULT_STUCK_RANK: return "stuck rank";
    default: return "unknown fault";
  }
}

const char* stepStateName(uint32_t state) noexcept {
  switch (state) {
    case 0: return "none";
    case 8: return "SendGPUWait";
    case 9: return "SendWait";
    case 10: return "RecvWait";
    case 11: return "RecvFlushWait";
    case 12: return "RecvGPUWait";
    case 20: return "SendPeerWait";
    default: return "other";
  }
}

}  // namespace resilient::blackbox
