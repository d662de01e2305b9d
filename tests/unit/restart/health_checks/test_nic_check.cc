// nicHealthCheck() on fake sysfs trees: Ethernet link state and counters, IB
// port state and link_downed, the choice of interfaces and devices.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/health_checks/ethernet_link.h"
#include "restart/health_checks/infiniband_port.h"
#include "tests/unit/restart/health_checks/fake_sysfs.h"

using namespace resilient::restart;
using resilient::test::FakeSysfs;

namespace {

NicCheckOptions ethernetOnly(const FakeSysfs& sys, std::vector<std::string> names) {
  NicCheckOptions o;
  o.sysfsRoot = sys.root();
  o.interfaces = std::move(names);
  o.checkInfiniband = false;
  o.errorThreshold = 10;
  return o;
}

NicCheckOptions ibOnly(const FakeSysfs& sys) {
  NicCheckOptions o;
  o.sysfsRoot = sys.root();
  o.checkEthernet = false;
  o.errorThreshold = 10;
  return o;
}

}  // namespace

TEST_CASE("a healthy interface passes, again and again", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  auto check = nicHealthCheck(ethernetOnly(sys, {"eth0"}));
  CHECK_NOTHROW(check(State{}));
  CHECK_NOTHROW(check(State{}));
}

TEST_CASE("an interface that went down or lost its carrier fails", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  auto check = nicHealthCheck(ethernetOnly(sys, {"eth0"}));
  SECTION("operstate down") {
    sys.set("class/net/eth0/operstate", "down");
    CHECK_THROWS_AS(check(State{}), HealthCheckError);
    CHECK_THROWS_WITH(check(State{}), Catch::Contains("eth0: operstate down"));
  }
  SECTION("no carrier") {
    sys.set("class/net/eth0/carrier", "0");
    CHECK_THROWS_WITH(check(State{}), Catch::Contains("eth0: no carrier"));
  }
  SECTION("administratively down: carrier unreadable") {
    sys.set("class/net/eth0/flags", "0x1002");
    sys.remove("class/net/eth0/carrier");
    CHECK_THROWS_WITH(check(State{}), Catch::Contains("administratively down") &&
                                          Catch::Contains("carrier unreadable"));
  }
  SECTION("interface gone") {
    sys.remove("class/net/eth0/operstate");
    sys.remove("class/net/eth0/flags");
    CHECK_THROWS_WITH(check(State{}), Catch::Contains("eth0: no such interface"));
  }
}

TEST_CASE("a named interface that does not exist fails every check", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  auto check = nicHealthCheck(ethernetOnly(sys, {"eth0", "eth9"}));
  CHECK_THROWS_WITH(check(State{}),
                    Catch::Contains("eth9: no such interface") && !Catch::Contains("eth0"));
  CHECK_THROWS_AS(check(State{}), HealthCheckError);
}

TEST_CASE("error counters growing past the threshold fail, once per growth", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  sys.setCounter("eth0", "rx_errors", 100);
  auto check = nicHealthCheck(ethernetOnly(sys, {"eth0"}));  // baseline: 100 rx errors
  sys.setCounter("eth0", "rx_errors", 105);
  sys.setCounter("eth0", "tx_errors", 5);
  CHECK_NOTHROW(check(State{}));  // 10 new errors: at the threshold
  sys.setCounter("eth0", "rx_errors", 110);
  sys.setCounter("eth0", "tx_errors", 11);
  CHECK_THROWS_WITH(check(State{}),
                    Catch::Contains("5 rx and 6 tx errors") && Catch::Contains("threshold 10"));
  CHECK_NOTHROW(check(State{}));           // compared with the previous check, not the first
  sys.setCounter("eth0", "rx_errors", 3);  // counters reset (driver reload): not a fault
  CHECK_NOTHROW(check(State{}));
}

TEST_CASE("carrier changes since the previous check fail", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  auto check = nicHealthCheck(ethernetOnly(sys, {"eth0"}));
  sys.setCounter("eth0", "carrier_changes", 4);  // went down and came back
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("carrier changed 2 times"));
  CHECK_NOTHROW(check(State{}));

  NicCheckOptions tolerant = ethernetOnly(sys, {"eth0"});
  tolerant.carrierChangeThreshold = 2;
  auto lenient = nicHealthCheck(tolerant);
  sys.setCounter("eth0", "carrier_changes", 6);
  CHECK_NOTHROW(lenient(State{}));
}

TEST_CASE("selection in NCCL_SOCKET_IFNAME syntax keeps the interfaces up at the start",
          "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("eth0");
  sys.addInterface("eth1", "down", 0);
  sys.addInterface("docker0");
  sys.addInterface("lo", "unknown", 1);
  NicCheckOptions o;
  o.sysfsRoot = sys.root();
  o.checkInfiniband = false;
  o.errorThreshold = 0;
  o.interfaceSpec = "eth";
  auto check = nicHealthCheck(o);
  CHECK_NOTHROW(check(State{}));  // eth1 was down at the start: not watched
  sys.set("class/net/eth0/carrier", "0");
  CHECK_THROWS_WITH(check(State{}),
                    Catch::Contains("eth0: no carrier") && !Catch::Contains("eth1"));

  o.interfaceSpec = "=eth1";
  CHECK_THROWS_WITH(nicHealthCheck(o)(State{}),
                    Catch::Contains("no interface chosen by interface selection '=eth1' is up"));
}

TEST_CASE("NCCL's default choice of interfaces", "[health][nic]") {
  FakeSysfs sys;
  sys.addInterface("lo", "unknown", 1);
  CHECK(detail::selectEthernet(sys.root(), "") == std::vector<std::string>{"lo"});
  sys.addInterface("docker0");
  CHECK(detail::selectEthernet(sys.root(), "") == std::vector<std::string>{"docker0"});
  sys.addInterface("eth0");
  sys.addInterface("ens1");
  CHECK(detail::selectEthernet(sys.root(), " ") == std::vector<std::string>{"ens1", "eth0"});
  sys.addInterface("ib0");
  CHECK(detail::selectEthernet(sys.root(), "") == std::vector<std::string>{"ib0"});
  CHECK(detail::selectEthernet(sys.root(), "^ib,docker") ==
        std::vector<std::string>{"ens1", "eth0", "lo"});
}

TEST_CASE("an IB port that leaves ACTIVE fails", "[health][nic][ib]") {
  FakeSysfs sys;
  sys.addIbPort("mlx5_0", 1);
  auto check = nicHealthCheck(ibOnly(sys));
  CHECK_NOTHROW(check(State{}));
  sys.set("class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  sys.set("class/infiniband/mlx5_0/ports/1/phys_state", "3: Disabled");
  CHECK_THROWS_AS(check(State{}), HealthCheckError);
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("mlx5_0:1: state 1: DOWN (phys 3: Disabled)"));
  sys.set("class/infiniband/mlx5_0/ports/1/state", "2: INIT");
  CHECK_THROWS_WITH(check(State{}),
                    Catch::Contains("state 2: INIT") && Catch::Contains("not ACTIVE"));
}

TEST_CASE("link_downed increments fail, compared with the previous check", "[health][nic][ib]") {
  FakeSysfs sys;
  sys.addIbPort("mlx5_0", 1);
  sys.setIbCounter("mlx5_0", 1, "link_downed", 7);
  auto check = nicHealthCheck(ibOnly(sys));
  CHECK_NOTHROW(check(State{}));
  sys.setIbCounter("mlx5_0", 1, "link_downed", 8);
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("mlx5_0:1: link went down 1 times"));
  CHECK_NOTHROW(check(State{}));
  sys.setIbCounter("mlx5_0", 1, "link_error_recovery", 11);
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("11 link error recoveries"));
}

TEST_CASE("by default only the IB ports ACTIVE at the start are watched", "[health][nic][ib]") {
  FakeSysfs sys;
  sys.addIbPort("mlx5_0", 1);
  sys.addIbPort("mlx5_0", 2, "1: DOWN", "2: Polling");  // never cabled
  sys.addIbPort("mlx5_1", 1, "1: DOWN", "3: Disabled");
  auto check = nicHealthCheck(ibOnly(sys));
  CHECK_NOTHROW(check(State{}));
  sys.set("class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("mlx5_0:1") && !Catch::Contains("mlx5_0:2") &&
                                        !Catch::Contains("mlx5_1"));
}

TEST_CASE("named IB devices and ports", "[health][nic][ib]") {
  FakeSysfs sys;
  sys.addIbPort("mlx5_0", 1);
  sys.addIbPort("mlx5_0", 2, "1: DOWN");
  sys.addIbPort("mlx5_1", 1, "1: DOWN");
  NicCheckOptions o = ibOnly(sys);
  SECTION("a device checks its active ports") {
    o.ibDevices = {"mlx5_0"};
    CHECK_NOTHROW(nicHealthCheck(o)(State{}));
  }
  SECTION("a device with no active port fails") {
    o.ibDevices = {"mlx5_1"};
    CHECK_THROWS_WITH(nicHealthCheck(o)(State{}), Catch::Contains("mlx5_1:1: state 1: DOWN"));
  }
  SECTION("a named port is always checked") {
    o.ibDevices = {"mlx5_0:2"};
    CHECK_THROWS_WITH(nicHealthCheck(o)(State{}), Catch::Contains("mlx5_0:2"));
  }
  SECTION("a missing device or port fails") {
    o.ibDevices = {"mlx5_7"};
    CHECK_THROWS_WITH(nicHealthCheck(o)(State{}), Catch::Contains("IB device mlx5_7 not found"));
    o.ibDevices = {"mlx5_0:3"};
    CHECK_THROWS_WITH(nicHealthCheck(o)(State{}), Catch::Contains("mlx5_0:3: no such port"));
  }
  SECTION("a malformed name is a configuration error") {
    o.ibDevices = {"mlx5_0:x"};
    CHECK_THROWS_AS(nicHealthCheck(o), ConfigError);
  }
}

TEST_CASE("IB devices chosen by PCI affinity to the GPU", "[health][nic][ib]") {
  FakeSysfs sys;
  sys.addIbPort("mlx5_0", 1);
  sys.addIbPort("mlx5_1", 1);
  sys.addIbPort("mlx5_2", 1);
  sys.placeIbDevice("mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0");
  sys.placeIbDevice("mlx5_1", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0");
  sys.placeIbDevice("mlx5_2", "pci0000:80/0000:80:01.0/0000:81:00.0");
  sys.placeGpu("0000:17:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:17:00.0");
  CHECK(detail::ibDevicesNearGpu(sys.root(), "00000000:17:00.0") ==
        std::vector<std::string>{"mlx5_0", "mlx5_1"});
  sys.placeGpu("0000:c1:00.0", "pci0000:80/0000:80:01.0/0000:c1:00.0");
  CHECK(detail::ibDevicesNearGpu(sys.root(), "0000:C1:00.0") == std::vector<std::string>{"mlx5_2"});
  CHECK_FALSE(detail::ibDevicesNearGpu(sys.root(), "0000:99:00.0").has_value());

  NicCheckOptions o = ibOnly(sys);
  o.gpuPciBusId = "0000:c1:00.0";
  auto check = nicHealthCheck(o);
  sys.set("class/infiniband/mlx5_0/ports/1/state", "1: DOWN");  // not near this GPU
  CHECK_NOTHROW(check(State{}));
  sys.setIbCounter("mlx5_2", 1, "link_downed", 1);
  CHECK_THROWS_WITH(check(State{}), Catch::Contains("mlx5_2:1"));
}

TEST_CASE("a machine without IB passes the IB part", "[health][nic][ib]") {
  FakeSysfs sys;
  CHECK_NOTHROW(nicHealthCheck(ibOnly(sys))(State{}));
}

TEST_CASE("negative thresholds are configuration errors", "[health][nic]") {
  FakeSysfs sys;
  NicCheckOptions o = ibOnly(sys);
  o.errorThreshold = -1;
  CHECK_THROWS_AS(nicHealthCheck(o), ConfigError);
  o.errorThreshold = 0;
  o.linkDownedThreshold = -3;
  CHECK_THROWS_WITH(nicHealthCheck(o), Catch::Contains("linkDownedThreshold"));
}

TEST_CASE("the check against this machine's real sysfs does not crash", "[health][nic]") {
  NicCheckOptions o;
  o.interfaceSpec = "lo";
  o.errorThreshold = 1000000;
  o.carrierChangeThreshold = 1000000;
  auto check = nicHealthCheck(o);
  CHECK_NOTHROW(check(State{}));  // loopback is always up
}
