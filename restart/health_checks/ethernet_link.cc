#include "restart/health_checks/ethernet_link.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "common/net/interfaces.h"
#include "restart/health_checks/sysfs.h"

namespace resilient::restart::detail {
namespace {

constexpr unsigned kIffUp = 0x1;

bool parseFlags(const std::optional<std::string>& text, unsigned* flags) {
  if (!text) {
    return false;
  }
  std::string_view v(*text);
  if (v.substr(0, 2) == "0x" || v.substr(0, 2) == "0X") {
    v.remove_prefix(2);
  }
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *flags, 16);
  return ec == std::errc() && end == v.data() + v.size();
}

std::vector<std::string> matching(const std::vector<std::string>& names, std::string_view spec) {
  const auto parsed = net::parseIfnameSpec(spec);
  std::vector<std::string> out;
  std::copy_if(names.begin(), names.end(), std::back_inserter(out),
               [&](const std::string& n) { return net::matchIfname(parsed, n); });
  return out;
}

}  // namespace

EthernetSample readEthernet(const std::string& sysfsRoot, const std::string& name) {
  const std::string dir = sysfsRoot + "/class/net/" + name + "/";
  EthernetSample s;
  s.operstate = readAttribute(dir + "operstate").value_or("");
  unsigned flags = 0;
  s.present = !s.operstate.empty() || readAttribute(dir + "flags").has_value();
  s.adminUp = parseFlags(readAttribute(dir + "flags"), &flags) && (flags & kIffUp) != 0;
  if (const auto carrier = readAttribute(dir + "carrier")) {
    s.carrier = *carrier == "1";
  }
  s.carrierChanges = readCounter(dir + "carrier_changes");
  s.rxErrors = readCounter(dir + "statistics/rx_errors");
  s.txErrors = readCounter(dir + "statistics/tx_errors");
  return s;
}

bool ethernetUsable(const EthernetSample& s) {
  const bool stateOk = s.operstate == "up" || s.operstate == "unknown";
  return s.present && stateOk && s.carrier.value_or(false);
}

std::vector<std::string> selectEthernet(const std::string& sysfsRoot, std::string_view spec) {
  const std::vector<std::string> names = listDirectory(sysfsRoot + "/class/net");
  if (spec.find_first_not_of(" \t") != std::string_view::npos) {
    return matching(names, spec);
  }
  for (const char* fallback : {"ib", "^docker,lo", "docker", "lo"}) {
    if (auto chosen = matching(names, fallback); !chosen.empty()) {
      return chosen;
    }
  }
  return {};
}

int64_t growth(const std::optional<int64_t>& previous, const std::optional<int64_t>& current) {
  if (!previous || !current || *current < *previous) {
    return 0;
  }
  return *current - *previous;
}

std::vector<std::string> ethernetProblems(const std::string& name, const EthernetSample& previous,
                                          const EthernetSample& current, const Thresholds& limits) {
  std::vector<std::string> problems;
  if (!current.present) {
    problems.push_back(name + ": no such interface");
    return problems;
  }
  if (!current.adminUp) {
    problems.push_back(name + ": administratively down");
  }
  if (current.operstate != "up" && current.operstate != "unknown") {
    problems.push_back(name + ": operstate " +
                       (current.operstate.empty() ? "unreadable" : current.operstate));
  }
  if (!current.carrier.value_or(false)) {
    problems.push_back(name + (current.carrier ? ": no carrier" : ": carrier unreadable"));
  }
  if (const int64_t flaps = growth(previous.carrierChanges, current.carrierChanges);
      flaps > limits.carrierChanges) {
    problems.push_back(name + ": carrier changed " + std::to_string(flaps) +
                       " times since the previous check (threshold " +
                       std::to_string(limits.carrierChanges) + ")");
  }
  const int64_t rx = growth(previous.rxErrors, current.rxErrors);
  const int64_t tx = growth(previous.txErrors, current.txErrors);
  if (rx + tx > limits.errors) {
    problems.push_back(name + ": " + std::to_string(rx) + " rx and " + std::to_string(tx) +
                       " tx errors since the previous check (threshold " +
                       std::to_string(limits.errors) + ")");
  }
  return problems;
}

}  // namespace resilient::restart::detail
