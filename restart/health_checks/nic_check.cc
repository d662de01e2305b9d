// The NIC health check: link state and error counters of the job's Ethernet
// interfaces and InfiniBand ports, from sysfs (the reference's
// ChainedNicHealthCheck and NicLinkStateHealthCheck, for both kinds of NIC).
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/params.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/health_checks/ethernet_link.h"
#include "restart/health_checks/infiniband_port.h"

namespace resilient::restart {
namespace {

using detail::EthernetSample;
using detail::IbPortSample;
using detail::Thresholds;

struct EthernetWatch {
  std::string name;
  EthernetSample last;
};

struct IbPortWatch {
  std::string device;
  int port = 0;
  IbPortSample last;
  std::string label() const { return device + ":" + std::to_string(port); }
};

struct NicWatch {
  std::string root;
  Thresholds ethernetLimits;
  Thresholds ibLimits;
  std::vector<EthernetWatch> interfaces;
  std::vector<IbPortWatch> ports;
  std::vector<std::string> setupProblems;  // reported by every check
  std::mutex mutex;                        // one check at a time
};

void chooseEthernet(const NicCheckOptions& options, NicWatch* watch) {
  if (!options.interfaces.empty()) {
    for (const std::string& name : options.interfaces) {
      watch->interfaces.push_back({name, detail::readEthernet(watch->root, name)});
    }
    return;
  }
  const std::string spec = options.interfaceSpec
                               ? *options.interfaceSpec
                               : config::Params::global().get<config::kSocketIfname>();
  const std::string what = spec.empty() ? std::string("NCCL's default interface choice")
                                        : "interface selection '" + spec + "'";
  for (const std::string& name : detail::selectEthernet(watch->root, spec)) {
    EthernetSample sample = detail::readEthernet(watch->root, name);
    if (detail::ethernetUsable(sample)) {
      watch->interfaces.push_back({name, std::move(sample)});
    } else {
      RES_INFO(log::kRestart, "NIC health check: %s is not up now, not watched (%s)", name.c_str(),
               what.c_str());
    }
  }
  if (watch->interfaces.empty()) {
    watch->setupProblems.push_back("no interface chosen by " + what + " is up under " +
                                   watch->root + "/class/net");
  }
}

// Where an IB device to watch comes from: the options named it, or it was found.
enum class DeviceChoice { kNamed, kFound };

// Watches the ports of `device`: `port` alone when > 0; else the ports that
// are ACTIVE now, or every port of a named device when none is (so that each
// check reports them). A named device that is missing is a setup problem.
void watchIbDevice(NicWatch* watch, const std::string& device, int port, DeviceChoice choice) {
  const bool named = choice == DeviceChoice::kNamed;
  const std::vector<int> ports = detail::listIbPorts(watch->root, device);
  if (ports.empty()) {
    if (named) {
      watch->setupProblems.push_back("IB device " + device + " not found under " + watch->root +
                                     "/class/infiniband");
    }
    return;
  }
  if (port > 0) {
    watch->ports.push_back({device, port, detail::readIbPort(watch->root, device, port)});
    return;
  }
  std::vector<IbPortWatch> active;
  std::vector<IbPortWatch> all;
  for (int p : ports) {
    IbPortWatch w{device, p, detail::readIbPort(watch->root, device, p)};
    if (detail::ibPortActive(w.last)) {
      active.push_back(w);
    } else if (!named) {
      RES_INFO(log::kRestart, "NIC health check: %s is %s now, not watched", w.label().c_str(),
               w.last.state.c_str());
    }
    all.push_back(std::move(w));
  }
  const auto& chosen = (active.empty() && named) ? all : active;
  watch->ports.insert(watch->ports.end(), chosen.begin(), chosen.end());
}

void chooseInfiniband(const NicCheckOptions& options, NicWatch* watch) {
  if (!options.ibDevices.empty()) {
    for (const std::string& item : options.ibDevices) {
      const size_t colon = item.rfind(':');
      int port = 0;
      std::string device = item;
      if (colon != std::string::npos) {
        device = item.substr(0, colon);
        try {
          port = std::stoi(item.substr(colon + 1));
        } catch (const std::exception&) {
          port = -1;
        }
        if (port <= 0) {
          throw ConfigError("nicHealthCheck: '" + item +
                            "' is not an IB device or device:port (e.g. mlx5_0 or mlx5_0:1)");
        }
      }
      watchIbDevice(watch, device, port, DeviceChoice::kNamed);
    }
    return;
  }
  std::vector<std::string> devices = detail::listIbDevices(watch->root);
  if (!options.gpuPciBusId.empty() && !devices.empty()) {
    if (auto near = detail::ibDevicesNearGpu(watch->root, options.gpuPciBusId)) {
      devices = std::move(*near);
    } else {
      RES_WARN(log::kRestart,
               "NIC health check: no PCI path for GPU %s or the IB devices under %s; watching "
               "every IB device",
               options.gpuPciBusId.c_str(), watch->root.c_str());
    }
  }
  for (const std::string& device : devices) {
    watchIbDevice(watch, device, 0, DeviceChoice::kFound);
  }
}

int64_t nonNegative(int64_t value, const char* name) {
  if (value < 0) {
    throw ConfigError(std::string("nicHealthCheck: ") + name + " must be 0 or more, not " +
                      std::to_string(value));
  }
  return value;
}

}  // namespace

HealthCheckFn nicHealthCheck(NicCheckOptions options) {
  auto watch = std::make_shared<NicWatch>();
  watch->root = options.sysfsRoot.empty() ? std::string("/sys") : options.sysfsRoot;
  const int64_t errors = nonNegative(
      options.errorThreshold ? *options.errorThreshold
                             : config::Params::global().get<config::kHealthNicErrorThreshold>(),
      "errorThreshold");
  watch->ethernetLimits = {errors,
                           nonNegative(options.carrierChangeThreshold, "carrierChangeThreshold")};
  watch->ibLimits = {errors, nonNegative(options.linkDownedThreshold, "linkDownedThreshold")};
  if (options.checkEthernet) {
    chooseEthernet(options, watch.get());
  }
  if (options.checkInfiniband) {
    chooseInfiniband(options, watch.get());
  }
  return [watch](const State&) {
    std::lock_guard<std::mutex> lock(watch->mutex);
    std::vector<std::string> problems = watch->setupProblems;
    for (EthernetWatch& w : watch->interfaces) {
      EthernetSample now = detail::readEthernet(watch->root, w.name);
      for (auto& p : detail::ethernetProblems(w.name, w.last, now, watch->ethernetLimits)) {
        problems.push_back(std::move(p));
      }
      w.last = std::move(now);
    }
    for (IbPortWatch& w : watch->ports) {
      IbPortSample now = detail::readIbPort(watch->root, w.device, w.port);
      for (auto& p : detail::ibPortProblems(w.label(), w.last, now, watch->ibLimits)) {
        problems.push_back(std::move(p));
      }
      w.last = std::move(now);
    }
    if (!problems.empty()) {
      std::string message = "NIC health check failed: ";
      for (size_t i = 0; i < problems.size(); ++i) {
        message += (i == 0 ? "" : "; ") + problems[i];
      }
      throw HealthCheckError(message);
    }
  };
}

}  // namespace resilient::restart
