#include "plugin/transport/tcp/devices.h"

#include <sys/socket.h>

namespace resilient::transport::tcp {

Status findDevices(const TcpOptions& options, std::vector<Device>* out) {
  std::vector<net::InterfaceAddress> candidates;
  RESILIENT_TRY(net::listInterfaceAddresses(&candidates));
  const std::vector<net::InterfaceAddress> chosen =
      net::selectInterfaces(candidates, options.ifname, options.family);
  if (chosen.empty()) {
    std::string names;
    for (const net::InterfaceAddress& c : candidates) {
      if (names.find(c.name) == std::string::npos) {
        names += names.empty() ? c.name : "," + c.name;
      }
    }
    return invalidUsage(
        "tcp: no network interface matches NCCL_SOCKET_IFNAME '" + options.ifname + "'" +
        (options.family != 0 ? std::string(options.family == AF_INET ? " (IPv4)" : " (IPv6)")
                             : std::string()) +
        "; interfaces that are up: " + (names.empty() ? "none" : names));
  }
  out->clear();
  for (const net::InterfaceAddress& c : chosen) {
    Device d;
    d.name = c.name;
    d.address = c.address;
    d.pciPath = net::interfacePciPath(c.name);
    d.speedMbps = net::interfaceSpeedMbps(c.name);
    out->push_back(std::move(d));
  }
  return {};
}

}  // namespace resilient::transport::tcp
