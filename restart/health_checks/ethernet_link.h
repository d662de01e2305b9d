// One Ethernet (or IPoIB) interface as /sys/class/net/<if>/ shows it, the
// choice of interfaces in NCCL_SOCKET_IFNAME syntax, and what is wrong between
// two samples. Internal to the NIC health check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace resilient::restart::detail {

struct EthernetSample {
  bool present = false;         // /sys/class/net/<if> exists
  bool adminUp = false;         // IFF_UP in `flags`
  std::string operstate;        // "up", "down", "unknown", "lowerlayerdown", ...
  std::optional<bool> carrier;  // nullopt: unreadable (the kernel refuses it while down)
  std::optional<int64_t> carrierChanges;
  std::optional<int64_t> rxErrors;
  std::optional<int64_t> txErrors;
};

EthernetSample readEthernet(const std::string& sysfsRoot, const std::string& name);

// Up and running: operstate "up" (or "unknown", as loopback and tunnels
// report, with a carrier) and a carrier.
bool ethernetUsable(const EthernetSample& s);

// The interfaces of /sys/class/net that `spec` (NCCL_SOCKET_IFNAME syntax)
// selects; an empty spec chooses like NCCL: "ib*", else all but "docker*" and
// "lo", else "docker*", else "lo".
std::vector<std::string> selectEthernet(const std::string& sysfsRoot, std::string_view spec);

struct Thresholds {
  int64_t errors = 0;          // rx_errors + tx_errors (and IB link_error_recovery)
  int64_t carrierChanges = 0;  // carrier_changes (and IB link_downed)
};

// What is wrong with `name` now ("eth0: operstate down, no carrier"), counting
// the counters' growth since `previous` (counters that went backwards, after a
// driver reload, count as zero). Empty when it is healthy.
std::vector<std::string> ethernetProblems(const std::string& name, const EthernetSample& previous,
                                          const EthernetSample& current, const Thresholds& limits);

// current - previous when both are known and current >= previous, else 0.
int64_t growth(const std::optional<int64_t>& previous, const std::optional<int64_t>& current);

}  // namespace resilient::restart::detail
