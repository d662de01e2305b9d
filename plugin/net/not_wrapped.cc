#include "plugin/net/not_wrapped.h"

#include <string>

#include "common/log.h"

namespace resilient::net {
namespace {

// The GIN and RMA plugin symbols NCCL 2.28 to 2.30 look up (newest first).
constexpr const char* kGinSymbols[] = {"ncclGinPlugin_v14", "ncclGinPlugin_v13",
                                       "ncclGinPlugin_v12", "ncclGinPlugin_v11"};
constexpr const char* kRmaSymbols[] = {"ncclRmaPlugin_v14", "ncclRmaPlugin_v13"};

template <size_t N>
std::string exported(const transport::external::ExternalTransport& inner,
                     const char* const (&symbols)[N]) {
  std::string found;
  for (const char* symbol : symbols) {
    if (inner.exports(symbol)) {
      found += found.empty() ? "" : ", ";
      found += symbol;
    }
  }
  return found;
}

}  // namespace

void noteNotWrapped(const transport::external::ExternalTransport& inner) {
  const std::string gin = exported(inner, kGinSymbols);
  const std::string rma = exported(inner, kRmaSymbols);
  if (gin.empty() && rma.empty()) {
    return;
  }
  const std::string what = gin.empty() ? rma : rma.empty() ? gin : gin + ", " + rma;
  std::string how = "NCCL_GIN_PLUGIN=" + inner.libraryPath();
  if (!rma.empty()) {
    how += " (and NCCL_RMA_PLUGIN=" + inner.libraryPath() + ")";
  }
  RES_WARN(NCCL_NET | NCCL_INIT,
           "inner net plugin %s also offers GPU-initiated networking (%s), which the resilient "
           "wrapper does not pass through: with NCCL 2.29 or newer set %s to load it directly "
           "(its traffic never crosses the net plugin, so nothing of it is watched either way); "
           "NCCL 2.28 finds GIN only in the net plugin's library and runs without it (multi-node "
           "device-API communicators fail)",
           inner.name(), what.c_str(), how.c_str());
}

}  // namespace resilient::net
