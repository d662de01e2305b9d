// InfiniBand ports as /sys/class/infiniband/<dev>/ports/<n>/ shows them (the
// same port attributes ibv_query_port returns, plus the error counters), the
// devices closest to a GPU in the PCI tree, and what is wrong between two
// samples. Internal to the NIC health check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "restart/health_checks/ethernet_link.h"

namespace resilient::restart::detail {

struct IbPortSample {
  bool present = false;   // the port directory exists
  std::string state;      // "4: ACTIVE", "1: DOWN", ...
  std::string physState;  // "5: LinkUp", "3: Disabled", ...
  std::optional<int64_t> linkDowned;
  std::optional<int64_t> linkErrorRecovery;
};

IbPortSample readIbPort(const std::string& sysfsRoot, const std::string& device, int port);

bool ibPortActive(const IbPortSample& s);

// The IB devices of /sys/class/infiniband, sorted.
std::vector<std::string> listIbDevices(const std::string& sysfsRoot);
// The port numbers of one device, ascending.
std::vector<int> listIbPorts(const std::string& sysfsRoot, const std::string& device);

// "0000:17:00.0" from CUDA's or NVML's form ("00000000:17:00.0"), lower case.
std::string normalizePciBusId(const std::string& busId);

// The IB devices whose PCI path (the target of <dev>/device) shares the most
// leading components with the GPU's (/sys/bus/pci/devices/<busId>): the
// nearest switch wins; ties are all returned. nullopt when the GPU's path or
// no device's path resolves.
std::optional<std::vector<std::string>> ibDevicesNearGpu(const std::string& sysfsRoot,
                                                         const std::string& gpuPciBusId);

// What is wrong with port `label` ("mlx5_0:1") now, counting the counters'
// growth since `previous`; empty when healthy. limits.carrierChanges bounds
// link_downed, limits.errors link_error_recovery.
std::vector<std::string> ibPortProblems(const std::string& label, const IbPortSample& previous,
                                        const IbPortSample& current, const Thresholds& limits);

}  // namespace resilient::restart::detail
