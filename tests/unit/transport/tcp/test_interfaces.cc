#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/net/interfaces.h"
#include "plugin/transport/tcp/devices.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"
#include "tests/support/mock_logger.h"
#include "tests/unit/transport/tcp/tcp_test_util.h"

using namespace resilient;
using namespace resilient::net;
using namespace resilient::transport::tcp;

namespace {

InterfaceAddress v4(const std::string& name, const char* ip) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &in.sin_addr);
  return InterfaceAddress{name, SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&in))};
}

InterfaceAddress v6(const std::string& name, const char* ip) {
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  inet_pton(AF_INET6, ip, &in.sin6_addr);
  return InterfaceAddress{name, SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&in))};
}

std::vector<std::string> names(const std::vector<InterfaceAddress>& list) {
  std::vector<std::string> out;
  out.reserve(list.size());
  for (const auto& a : list) {
    out.push_back(a.name);
  }
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("NCCL_SOCKET_IFNAME specs parse", "[transport][tcp][ifname]") {
  IfnameSpec s = parseIfnameSpec("eth,ib");
  CHECK_FALSE(s.exclude);
  CHECK_FALSE(s.exact);
  CHECK(s.names == Names{"eth", "ib"});

  s = parseIfnameSpec("^docker,lo");
  CHECK(s.exclude);
  CHECK_FALSE(s.exact);
  CHECK(s.names == Names{"docker", "lo"});

  s = parseIfnameSpec("=eth0");
  CHECK_FALSE(s.exclude);
  CHECK(s.exact);
  CHECK(s.names == Names{"eth0"});

  s = parseIfnameSpec("^=eth1, eth2 ,,");
  CHECK(s.exclude);
  CHECK(s.exact);
  CHECK(s.names == Names{"eth1", "eth2"});

  CHECK(parseIfnameSpec("").names.empty());
}

TEST_CASE("interface names match prefixes, exact names and exclusions",
          "[transport][tcp][ifname]") {
  const IfnameSpec prefixes = parseIfnameSpec("eth,ib");
  CHECK(matchIfname(prefixes, "eth0"));
  CHECK(matchIfname(prefixes, "eth10"));
  CHECK(matchIfname(prefixes, "ib0"));
  CHECK_FALSE(matchIfname(prefixes, "enp1s0"));
  CHECK_FALSE(matchIfname(prefixes, "et"));

  const IfnameSpec exact = parseIfnameSpec("=eth0");
  CHECK(matchIfname(exact, "eth0"));
  CHECK_FALSE(matchIfname(exact, "eth01"));
  CHECK_FALSE(matchIfname(exact, "eth"));

  const IfnameSpec exclude = parseIfnameSpec("^docker,lo");
  CHECK(matchIfname(exclude, "eth0"));
  CHECK_FALSE(matchIfname(exclude, "docker0"));
  CHECK_FALSE(matchIfname(exclude, "lo"));

  const IfnameSpec excludeExact = parseIfnameSpec("^=eth0");
  CHECK_FALSE(matchIfname(excludeExact, "eth0"));
  CHECK(matchIfname(excludeExact, "eth01"));

  CHECK_FALSE(matchIfname(parseIfnameSpec(""), "eth0"));  // empty include list: nothing
  CHECK(matchIfname(parseIfnameSpec("^"), "eth0"));       // empty exclude list: everything
}

TEST_CASE("the automatic choice skips lo and docker unless nothing else exists",
          "[transport][tcp][ifname]") {
  const std::vector<InterfaceAddress> host = {v4("lo", "127.0.0.1"), v4("docker0", "172.17.0.1"),
                                              v4("eth0", "10.0.0.2"), v4("enp2s0", "10.1.0.2"),
                                              v6("lo", "::1")};
  CHECK(names(selectInterfaces(host, "", 0)) == Names{"eth0", "enp2s0"});

  const std::vector<InterfaceAddress> withIb = {v4("eth0", "10.0.0.2"), v4("ib0", "10.2.0.2")};
  CHECK(names(selectInterfaces(withIb, "", 0)) == Names{"ib0"});

  const std::vector<InterfaceAddress> dockerAndLo = {v4("lo", "127.0.0.1"),
                                                     v4("docker0", "172.17.0.1")};
  CHECK(names(selectInterfaces(dockerAndLo, "", 0)) == Names{"docker0"});

  const std::vector<InterfaceAddress> onlyLo = {v4("lo", "127.0.0.1"), v6("lo", "::1")};
  CHECK(names(selectInterfaces(onlyLo, "", 0)) == Names{"lo"});
  CHECK(selectInterfaces({}, "", 0).empty());
}

TEST_CASE("an explicit spec selects, one device per interface, in order",
          "[transport][tcp][ifname]") {
  const std::vector<InterfaceAddress> host = {v4("lo", "127.0.0.1"),  v4("eth0", "10.0.0.2"),
                                              v4("eth1", "10.0.1.2"), v6("eth0", "fe80::1"),
                                              v6("eth0", "fd00::2"),  v4("docker0", "172.17.0.1"),
                                              v6("eth2", "fe80::2"),  v6("eth2", "fd00::3")};
  CHECK(names(selectInterfaces(host, "eth", 0)) == Names{"eth0", "eth1", "eth2"});
  CHECK(names(selectInterfaces(host, "=eth1", 0)) == Names{"eth1"});
  CHECK(names(selectInterfaces(host, "^eth", 0)) == Names{"lo", "docker0"});
  CHECK(names(selectInterfaces(host, "lo", 0)) == Names{"lo"});
  CHECK(selectInterfaces(host, "=eth", 0).empty());
  CHECK(names(selectInterfaces(host, "eth", 0, 2)) == Names{"eth0", "eth1"});

  SECTION("IPv4 is preferred within an interface when any family is allowed") {
    const auto eth = selectInterfaces(host, "=eth0", 0);
    REQUIRE(eth.size() == 1);
    CHECK(eth[0].address.family() == AF_INET);
  }
  SECTION("a family filter; global IPv6 before link-local") {
    const auto eth = selectInterfaces(host, "eth", AF_INET6);
    REQUIRE(names(eth) == Names{"eth0", "eth2"});
    CHECK(eth[0].address.hostText() == "fd00::2");
    CHECK(eth[1].address.hostText() == "fd00::3");
    CHECK(names(selectInterfaces(host, "eth", AF_INET)) == Names{"eth0", "eth1"});
  }
}

TEST_CASE("link speeds parse with a 10 Gb/s fallback", "[transport][tcp][ifname]") {
  CHECK(parseSpeedMbps("25000\n") == 25000);
  CHECK(parseSpeedMbps("100") == 100);
  CHECK(parseSpeedMbps("-1\n") == kDefaultSpeedMbps);
  CHECK(parseSpeedMbps("") == kDefaultSpeedMbps);
  CHECK(parseSpeedMbps("fast") == kDefaultSpeedMbps);
  CHECK(parseSpeedMbps("0") == kDefaultSpeedMbps);
}

TEST_CASE("the loopback device and its properties", "[transport][tcp][ifname]") {
  TcpTransport t(test::loopbackOptions(AF_INET));
  int ndev = 0;
  REQUIRE(t.devices(&ndev).ok());
  REQUIRE(ndev == 1);
  transport::Properties p;
  REQUIRE(t.properties(0, &p).ok());
  CHECK(std::string(p.name) == "lo");
  CHECK(p.pciPath == nullptr);  // virtual
  CHECK(p.speedMbps == kDefaultSpeedMbps);
  CHECK(p.ptrSupport == transport::kPtrHost);
  CHECK(p.regIsGlobal == 0);
  CHECK(p.latencyUs == 0);
  CHECK(p.maxRecvs == 8);
  CHECK(p.maxP2pBytes == (size_t{1} << 30));
  CHECK(p.maxCollBytes == (size_t{1} << 30));
  CHECK(t.handleBytes() == kHandleBytes);
  CHECK_FALSE(t.properties(1, &p).ok());
  CHECK_FALSE(t.properties(-1, &p).ok());
}

TEST_CASE("a spec that matches nothing is a clear invalid-usage error",
          "[transport][tcp][ifname]") {
  TcpOptions o = test::loopbackOptions();
  o.ifname = "=no-such-interface0";
  TcpTransport t(o);
  int ndev = -1;
  const Status s = t.devices(&ndev);
  REQUIRE_FALSE(s.ok());
  CHECK(ndev == 0);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("=no-such-interface0"));
  CHECK_THAT(s.message(), Catch::Contains("lo"));
}

TEST_CASE("options are clamped into range", "[transport][tcp][ifname]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o;
  o.nSocks = 0;
  o.nThreads = 100;  // above nSocks
  o.chunkBytes = 1;
  o.inlineBytes = size_t{1} << 40;
  o.family = 12345;
  o.socketBufferBytes = -1;
  const TcpOptions c = clampOptions(o);
  CHECK(c.nSocks == 1);
  CHECK(c.nThreads == 1);
  CHECK(c.chunkBytes == kMinChunkBytes);
  CHECK(c.inlineBytes == kMaxInlineBytes);
  CHECK(c.family == 0);
  CHECK(c.socketBufferBytes == 0);
  CHECK(logger.count(NCCL_LOG_WARN, "option nSocks = 0 out of range") == 1);
  const TcpOptions d = clampOptions(TcpOptions{});
  CHECK(d.nSocks == TcpOptions{}.nSocks);
  CHECK(d.nThreads == TcpOptions{}.nThreads);
  CHECK(d.chunkBytes == TcpOptions{}.chunkBytes);
}
