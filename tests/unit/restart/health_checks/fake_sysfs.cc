#include "tests/unit/restart/health_checks/fake_sysfs.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace resilient::test {

namespace fs = std::filesystem;

void FakeSysfs::set(const std::string& relative, const std::string& content) const {
  const fs::path file = fs::path(root_) / relative;
  fs::create_directories(file.parent_path());
  std::ofstream out(file);
  out << content << "\n";
  if (!out) {
    throw std::runtime_error("cannot write " + file.string());
  }
}

void FakeSysfs::remove(const std::string& relative) const {
  fs::remove(fs::path(root_) / relative);
}

void FakeSysfs::addInterface(const std::string& name, const std::string& operstate, int carrier,
                             bool adminUp) const {
  const std::string dir = "class/net/" + name + "/";
  set(dir + "operstate", operstate);
  set(dir + "carrier", std::to_string(carrier));
  set(dir + "flags", adminUp ? "0x1003" : "0x1002");
  set(dir + "carrier_changes", "2");
  set(dir + "statistics/rx_errors", "0");
  set(dir + "statistics/tx_errors", "0");
}

void FakeSysfs::setCounter(const std::string& name, const std::string& counter,
                           int64_t value) const {
  const bool statistic = counter != "carrier_changes";
  set("class/net/" + name + (statistic ? "/statistics/" : "/") + counter, std::to_string(value));
}

void FakeSysfs::addIbPort(const std::string& device, int port, const std::string& state,
                          const std::string& physState) const {
  const std::string dir = "class/infiniband/" + device + "/ports/" + std::to_string(port) + "/";
  set(dir + "state", state);
  set(dir + "phys_state", physState);
  set(dir + "counters/link_downed", "0");
  set(dir + "counters/link_error_recovery", "0");
}

void FakeSysfs::setIbCounter(const std::string& device, int port, const std::string& counter,
                             int64_t value) const {
  set("class/infiniband/" + device + "/ports/" + std::to_string(port) + "/counters/" + counter,
      std::to_string(value));
}

void FakeSysfs::placeIbDevice(const std::string& device, const std::string& pciPath) const {
  const fs::path target = fs::path(root_) / "devices" / pciPath;
  fs::create_directories(target);
  const fs::path link = fs::path(root_) / "class/infiniband" / device / "device";
  fs::create_directories(link.parent_path());
  fs::create_directory_symlink(target, link);
}

void FakeSysfs::placeGpu(const std::string& busId, const std::string& pciPath) const {
  const fs::path target = fs::path(root_) / "devices" / pciPath;
  fs::create_directories(target);
  const fs::path link = fs::path(root_) / "bus/pci/devices" / busId;
  fs::create_directories(link.parent_path());
  fs::create_directory_symlink(target, link);
}

}  // namespace resilient::test
