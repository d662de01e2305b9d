// The host's network interfaces: NCCL_SOCKET_IFNAME-style matching, the
// choice among the host's interface addresses (pure functions over a
// candidate list, so tests need no real interfaces), link state and speed from
// sysfs. Used by the TCP transport (its devices), the liveness channel and the
// restart library's NIC health checks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/net/socket_address.h"
#include "common/status.h"

namespace resilient::net {

inline constexpr size_t kMaxDevices = 16;
inline constexpr int kDefaultSpeedMbps = 10000;

// A parsed NCCL_SOCKET_IFNAME value.
struct IfnameSpec {
  bool exclude = false;  // leading '^': the names are excluded
  bool exact = false;    // leading '=' (after any '^'): whole names, not prefixes
  std::vector<std::string> names;
};

// "eth,ib" -> prefixes; "^docker,lo" -> exclude; "=eth0" / "^=eth1" -> exact.
// Empty items are dropped; spaces around items are trimmed.
IfnameSpec parseIfnameSpec(std::string_view text);
// True when the interface `name` is selected by `spec`. An empty include list
// selects nothing; an empty exclude list excludes nothing.
bool matchIfname(const IfnameSpec& spec, std::string_view name) noexcept;

// One address of one interface, as getifaddrs lists it.
struct InterfaceAddress {
  std::string name;
  SocketAddress address;
};

// The devices for `spec` and `family` (0, AF_INET or AF_INET6) among
// `candidates`: one address per interface (IPv4 first, then global IPv6, then
// link-local IPv6), in the order the interfaces first appear, at most
// `maxDevices`. An empty spec chooses like NCCL: "ib" prefixes, else all but
// "docker*" and "lo", else "docker*", else "lo".
std::vector<InterfaceAddress> selectInterfaces(const std::vector<InterfaceAddress>& candidates,
                                               std::string_view spec, int family,
                                               size_t maxDevices = kMaxDevices);

// The IPv4/IPv6 addresses of the interfaces that are up (getifaddrs order).
Status listInterfaceAddresses(std::vector<InterfaceAddress>* out);

// The state of the interface that owns a local address (a connected socket's
// local end): whether it is administratively up and has a carrier
// (IFF_RUNNING). nullopt when no interface holds the address.
struct LinkState {
  std::string name;
  bool up = false;
  bool carrier = false;
};
std::optional<LinkState> linkStateOf(const SocketAddress& local);

// A link speed file's text ("25000\n") in Mbps; kDefaultSpeedMbps when it is
// unreadable, not a number, or not positive (-1: unknown).
int parseSpeedMbps(std::string_view text) noexcept;

// The interface's link speed (/sys/class/net/<name>/speed), in Mbps.
int interfaceSpeedMbps(const std::string& name);
// The real path of /sys/class/net/<name>/device; empty for a virtual interface.
std::string interfacePciPath(const std::string& name);

}  // namespace resilient::net
