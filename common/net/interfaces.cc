#include "common/net/interfaces.h"

#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include "common/log.h"

namespace resilient::net {
namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Preference of an address within its interface: lower is better.
int addressRank(const SocketAddress& a) noexcept {
  if (a.family() == AF_INET) {
    return 0;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) ? 2 : 1;
}

bool usableAddress(const SocketAddress& a, int family) noexcept {
  if (a.family() != AF_INET && a.family() != AF_INET6) {
    return false;
  }
  if (family != 0 && a.family() != family) {
    return false;
  }
  if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    // A v4-mapped address is the IPv4 address again.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return false;
    }
  }
  return true;
}

std::vector<InterfaceAddress> selectWith(const std::vector<InterfaceAddress>& candidates,
                                         const IfnameSpec& spec, int family, size_t maxDevices) {
  std::vector<InterfaceAddress> out;
  for (const InterfaceAddress& c : candidates) {
    if (!usableAddress(c.address, family) || !matchIfname(spec, c.name)) {
      continue;
    }
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const InterfaceAddress& o) { return o.name == c.name; });
    if (same != out.end()) {
      if (addressRank(c.address) < addressRank(same->address)) {
        same->address = c.address;
      }
      continue;
    }
    if (out.size() < maxDevices) {
      out.push_back(c);
    }
  }
  return out;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

IfnameSpec parseIfnameSpec(std::string_view text) {
  IfnameSpec spec;
  text = trim(text);
  if (!text.empty() && text.front() == '^') {
    spec.exclude = true;
    text.remove_prefix(1);
  }
  if (!text.empty() && text.front() == '=') {
    spec.exact = true;
    text.remove_prefix(1);
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    if (!item.empty()) {
      spec.names.emplace_back(item);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return spec;
}

bool matchIfname(const IfnameSpec& spec, std::string_view name) noexcept {
  bool listed = false;
  for (const std::string& n : spec.names) {
    if (spec.exact ? name == n : name.substr(0, n.size()) == n) {
      listed = true;
      break;
    }
  }
  return spec.exclude ? !listed : listed;
}

std::vector<InterfaceAddress> selectInterfaces(const std::vector<InterfaceAddress>& candidates,
                                               std::string_view spec, int family,
                                               size_t maxDevices) {
  if (!trim(spec).empty()) {
    return selectWith(candidates, parseIfnameSpec(spec), family, maxDevices);
  }
  // NCCL's automatic choice: IPoIB first, then anything but docker and loopback,
  // then docker, then loopback.
  for (const char* fallback : {"ib", "^docker,lo", "docker", "lo"}) {
    std::vector<InterfaceAddress> out =
        selectWith(candidates, parseIfnameSpec(fallback), family, maxDevices);
    if (!out.empty()) {
      return out;
    }
  }
  return {};
}

Status listInterfaceAddresses(std::vector<InterfaceAddress>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return systemError("tcp: getifaddrs");
  }
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, &freeifaddrs);
  out->clear();
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_name == nullptr || (ifa->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    const SocketAddress a = SocketAddress::fromSockaddr(ifa->ifa_addr);
    if (a.length == 0) {
      continue;  // not IPv4/IPv6 (AF_PACKET)
    }
    out->push_back(InterfaceAddress{ifa->ifa_name, a});
  }
  return {};
}

std::optional<LinkState> linkStateOf(const SocketAddress& local) {
  ifaddrs* list = nullptr;
  if (local.length == 0 || getifaddrs(&list) != 0) {
    return std::nullopt;
  }
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, &freeifaddrs);
  const std::string host = local.hostText();
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_name == nullptr ||
        ifa->ifa_addr->sa_family != local.family()) {
      continue;
    }
    if (SocketAddress::fromSockaddr(ifa->ifa_addr).hostText() == host) {
      return LinkState{ifa->ifa_name, (ifa->ifa_flags & IFF_UP) != 0,
                       (ifa->ifa_flags & IFF_RUNNING) != 0};
    }
  }
  return std::nullopt;
}

int parseSpeedMbps(std::string_view text) noexcept {
  text = trim(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    return kDefaultSpeedMbps;
  }
  return value;
}

int interfaceSpeedMbps(const std::string& name) {
  return parseSpeedMbps(readFirstLine("/sys/class/net/" + name + "/speed"));
}

std::string interfacePciPath(const std::string& name) {
  char resolved[PATH_MAX];
  if (realpath(("/sys/class/net/" + name + "/device").c_str(), resolved) == nullptr) {
    return {};
  }
  return resolved;
}

}  // namespace resilient::net
