// Builds what the core wraps from the knobs: the inner transport
// (NCCL_RESILIENT_INNER: our TCP, or another net plugin library), the fault
// injection decorator when NCCL_RESILIENT_FAULT is set, and the watchdog's
// settings (timeouts, job token, the address of the liveness channel).
#pragma once

#include <memory>

#include "common/params.h"
#include "common/status.h"
#include "nccl/log.h"
#include "plugin/net/watchdog.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

struct SelfIdentity;

struct InnerSetup {
  std::unique_ptr<transport::Transport> transport;
  WatchdogOptions watchdog;
  std::string blackboxDir;  // empty: no blackbox
};

// Our TCP transport's settings from the NCCL_RESILIENT_SOCKET_* knobs.
transport::tcp::TcpOptions tcpOptionsFrom(const config::Params& params);

Result<InnerSetup> makeInnerSetup(const config::Params& params, const SelfIdentity& self,
                                  ncclDebugLogger_t logger);

}  // namespace resilient::net
