// Process-level lifetime shared by the adapters: the legacy (v6–v10) context,
// the list of our own exported structs and the offer of their optional
// members, and the unload hook that stops the background thread if the
// library goes away without a finalize.
#include <mutex>

#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"
#include "nccl/net_v6.h"
#include "nccl/net_v7.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "plugin/net/abi/adapter.h"
#include "plugin/net/abi/optional_calls.h"

// Not const: init sets their optional members (optional_calls.h).
extern "C" {
extern ncclNet_v12_t ncclNetPlugin_v12;
extern ncclNet_v11_t ncclNetPlugin_v11;
extern ncclNet_v10_t ncclNetPlugin_v10;
extern ncclNet_v9_t ncclNetPlugin_v9;
extern ncclNet_v8_t ncclNetPlugin_v8;
extern ncclNet_v7_t ncclNetPlugin_v7;
extern ncclNet_v6_t ncclNetPlugin_v6;
}

namespace resilient::abi {
namespace {

std::mutex gLegacyMutex;
CoreImpl* gLegacyCore = nullptr;
CoreContext* gLegacyContext = nullptr;

const void* const kSelfSymbols[] = {&ncclNetPlugin_v12, &ncclNetPlugin_v11, &ncclNetPlugin_v10,
                                    &ncclNetPlugin_v9,  &ncclNetPlugin_v8,  &ncclNetPlugin_v7,
                                    &ncclNetPlugin_v6};
const net::SelfIdentity kSelf{kSelfSymbols, sizeof kSelfSymbols / sizeof kSelfSymbols[0]};

// Runs when the library is unloaded (dlclose or exit): releases the legacy
// context so that the watchdog thread is stopped before the code goes away.
__attribute__((destructor)) void releaseLegacyOnUnload() {
  std::lock_guard<std::mutex> lock(gLegacyMutex);
  if (gLegacyCore != nullptr) {
    (void)gLegacyCore->finalizeContext(gLegacyContext);
    CoreImpl::releaseRef(gLegacyCore);
    gLegacyCore = nullptr;
    gLegacyContext = nullptr;
  }
}

}  // namespace

const net::SelfIdentity& selfIdentity() noexcept {
  return kSelf;
}

void offerOptionalCalls(const transport::Capabilities& caps) noexcept {
  optional::offer(ncclNetPlugin_v12, caps);
  optional::offer(ncclNetPlugin_v11, caps);
  optional::offer(ncclNetPlugin_v10, caps);
  optional::offer(ncclNetPlugin_v9, caps);
  optional::offer(ncclNetPlugin_v8, caps);
  optional::offer(ncclNetPlugin_v7, caps);
  optional::offer(ncclNetPlugin_v6, caps);
}

ncclResult_t legacyInit(ncclDebugLogger_t logger) noexcept {
  return boundary::call("init", [&]() -> Status {
    std::lock_guard<std::mutex> lock(gLegacyMutex);
    if (gLegacyCore != nullptr) {
      return {};  // NCCL initialises old plugins once; a repeated init is harmless
    }
    Status error;
    CoreImpl* core = CoreImpl::acquire(kSelf, logger, &error);
    if (core == nullptr) {
      return error;
    }
    Status s = core->initContext(0, transport::CommConfig{}, &gLegacyContext);
    if (!s.ok()) {
      CoreImpl::releaseRef(core);
      return s;
    }
    gLegacyCore = core;
    offerOptionalCalls(core->capabilities());
    return {};
  });
}

CoreContext* legacyContext() noexcept {
  std::lock_guard<std::mutex> lock(gLegacyMutex);
  return gLegacyContext;
}

}  // namespace resilient::abi
