// ncclNetPlugin_v12 (NCCL 2.30: the v12 properties) as a Transport (adapt_context.h).
#include "nccl/net_v12.h"
#include "plugin/transport/external/adapt_context.h"

namespace resilient::transport::external {

Result<std::unique_ptr<ExternalTransport>> makeV12(PluginBinding binding) {
  return makeContextTransport<ncclNet_v12_t, 12>(std::move(binding));
}

}  // namespace resilient::transport::external
