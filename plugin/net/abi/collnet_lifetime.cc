// Process-level state of the exported CollNet tables: the offer of their
// optional members and the one context of the v6-v10 CollNets (NCCL's
// adapters init those once per process: src/plugin/net/net_v6..v10.cc,
// ncclCollNet_init).
#include "nccl/collnet_v10.h"
#include "nccl/collnet_v11.h"
#include "nccl/collnet_v12.h"
#include "nccl/collnet_v6.h"
#include "nccl/collnet_v7.h"
#include "nccl/collnet_v8.h"
#include "nccl/collnet_v9.h"
#include "plugin/net/abi/collnet_calls.h"

extern "C" {
extern ncclCollNet_v12_t ncclCollNetPlugin_v12;
extern ncclCollNet_v11_t ncclCollNetPlugin_v11;
extern ncclCollNet_v10_t ncclCollNetPlugin_v10;
extern ncclCollNet_v9_t ncclCollNetPlugin_v9;
extern ncclCollNet_v8_t ncclCollNetPlugin_v8;
extern ncclCollNet_v7_t ncclCollNetPlugin_v7;
extern ncclCollNet_v6_t ncclCollNetPlugin_v6;
}

namespace resilient::abi::collnet {

void offerAll(const transport::CollCapabilities& caps) noexcept {
  offer(ncclCollNetPlugin_v12, caps);
  offer(ncclCollNetPlugin_v11, caps);
  offer(ncclCollNetPlugin_v10, caps);
  offer(ncclCollNetPlugin_v9, caps);
  offer(ncclCollNetPlugin_v8, caps);
  offer(ncclCollNetPlugin_v7, caps);
  offer(ncclCollNetPlugin_v6, caps);
}

// The context is the live core's (Core::collLegacyContext): made by the first
// init of each core, released with it.
ncclResult_t legacyInit(ncclDebugLogger_t /*logger*/) noexcept {
  net::Core* core = coreWithCollNet();
  if (core == nullptr) {
    return ncclInternalError;  // NCCL disables CollNet (src/plugin/net.cc, ncclNetPluginInit)
  }
  return boundary::call("collnet init", [&]() -> Status {
    CoreContext* c = nullptr;
    if (Status st = core->collLegacyContext(&c); !st.ok()) {
      // NCCL disables CollNet and goes on (ncclNetPluginInit): INFO, not WARN.
      RES_INFO(NCCL_NET | NCCL_INIT, "CollNet init failed: %s", st.toString().c_str());
      return st;
    }
    offerAll(core->collNet()->capabilities());
    return {};
  });
}

CoreContext* legacyContext() noexcept {
  net::Core* core = net::Core::live();
  CoreContext* c = nullptr;
  if (core == nullptr || core->collNet() == nullptr || !core->collLegacyContext(&c).ok()) {
    return nullptr;
  }
  return c;
}

}  // namespace resilient::abi::collnet
