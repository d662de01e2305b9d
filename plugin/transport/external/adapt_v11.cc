// ncclNetPlugin_v11 (NCCL 2.28.3+) as a Transport (adapt_context.h).
#include "nccl/net_v11.h"
#include "plugin/transport/external/adapt_context.h"

namespace resilient::transport::external {

Result<std::unique_ptr<ExternalTransport>> makeV11(PluginBinding binding) {
  return makeContextTransport<ncclNet_v11_t, 11>(std::move(binding));
}

}  // namespace resilient::transport::external
