// The TCP transport's devices: the host's interfaces that NCCL_SOCKET_IFNAME
// (or NCCL_RESILIENT_SOCKET_IFNAME) and the address family select, with the
// properties NCCL asks for (common/net/interfaces.h does the choosing).
#pragma once

#include <string>
#include <vector>

#include "common/net/interfaces.h"
#include "common/net/socket_address.h"
#include "common/status.h"
#include "plugin/transport/tcp/options.h"

namespace resilient::transport::tcp {

struct Device {
  std::string name;
  std::string pciPath;  // empty: virtual (no /sys/class/net/<if>/device)
  int speedMbps = net::kDefaultSpeedMbps;
  SocketAddress address;
};

// The host's devices for `options` (ifname, family). invalidUsage when none
// match, naming the spec.
Status findDevices(const TcpOptions& options, std::vector<Device>* out);

}  // namespace resilient::transport::tcp
