#include "restart/health_checks/infiniband_port.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "restart/health_checks/sysfs.h"

namespace resilient::restart::detail {
namespace {

std::string portDir(const std::string& root, const std::string& device, int port) {
  return root + "/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/";
}

// Components of a resolved path; empty when it does not resolve.
std::vector<std::string> canonicalComponents(const std::string& path) {
  std::error_code ec;
  const auto resolved = std::filesystem::canonical(path, ec);
  std::vector<std::string> parts;
  if (ec) {
    return parts;
  }
  for (const auto& part : resolved) {
    parts.push_back(part.string());
  }
  return parts;
}

size_t commonPrefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) {
    ++n;
  }
  return n;
}

}  // namespace

IbPortSample readIbPort(const std::string& sysfsRoot, const std::string& device, int port) {
  const std::string dir = portDir(sysfsRoot, device, port);
  IbPortSample s;
  const auto state = readAttribute(dir + "state");
  s.present = state.has_value();
  s.state = state.value_or("");
  s.physState = readAttribute(dir + "phys_state").value_or("");
  s.linkDowned = readCounter(dir + "counters/link_downed");
  s.linkErrorRecovery = readCounter(dir + "counters/link_error_recovery");
  return s;
}

bool ibPortActive(const IbPortSample& s) {
  return s.present && s.state.find("ACTIVE") != std::string::npos;
}

std::vector<std::string> listIbDevices(const std::string& sysfsRoot) {
  return listDirectory(sysfsRoot + "/class/infiniband");
}

std::vector<int> listIbPorts(const std::string& sysfsRoot, const std::string& device) {
  std::vector<int> ports;
  for (const std::string& name :
       listDirectory(sysfsRoot + "/class/infiniband/" + device + "/ports")) {
    int port = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), port);
    if (ec == std::errc() && end == name.data() + name.size()) {
      ports.push_back(port);
    }
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

std::string normalizePciBusId(const std::string& busId) {
  std::string id;
  for (char c : busId) {
    id.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  // NVML writes an 8-digit domain, sysfs 4.
  if (const size_t colon = id.find(':'); colon == 8 && id.compare(0, 4, "0000") == 0) {
    id.erase(0, 4);
  }
  return id;
}

std::optional<std::vector<std::string>> ibDevicesNearGpu(const std::string& sysfsRoot,
                                                         const std::string& gpuPciBusId) {
  const auto gpu =
      canonicalComponents(sysfsRoot + "/bus/pci/devices/" + normalizePciBusId(gpuPciBusId));
  if (gpu.empty()) {
    return std::nullopt;
  }
  std::vector<std::string> best;
  size_t bestShared = 0;
  for (const std::string& device : listIbDevices(sysfsRoot)) {
    const auto path = canonicalComponents(sysfsRoot + "/class/infiniband/" + device + "/device");
    if (path.empty()) {
      continue;
    }
    const size_t shared = commonPrefix(gpu, path);
    if (best.empty() || shared > bestShared) {
      best.assign(1, device);
      bestShared = shared;
    } else if (shared == bestShared) {
      best.push_back(device);
    }
  }
  if (best.empty()) {
    return std::nullopt;
  }
  return best;
}

std::vector<std::string> ibPortProblems(const std::string& label, const IbPortSample& previous,
                                        const IbPortSample& current, const Thresholds& limits) {
  std::vector<std::string> problems;
  if (!current.present) {
    problems.push_back(label + ": no such port");
    return problems;
  }
  if (!ibPortActive(current)) {
    problems.push_back(label + ": state " + current.state +
                       (current.physState.empty() ? "" : " (phys " + current.physState + ")") +
                       ", not ACTIVE");
  }
  if (const int64_t downs = growth(previous.linkDowned, current.linkDowned);
      downs > limits.carrierChanges) {
    problems.push_back(label + ": link went down " + std::to_string(downs) +
                       " times since the previous check (link_downed; threshold " +
                       std::to_string(limits.carrierChanges) + ")");
  }
  if (const int64_t recoveries = growth(previous.linkErrorRecovery, current.linkErrorRecovery);
      recoveries > limits.errors) {
    problems.push_back(label + ": " + std::to_string(recoveries) +
                       " link error recoveries since the previous check (threshold " +
                       std::to_string(limits.errors) + ")");
  }
  return problems;
}

}  // namespace resilient::restart::detail
