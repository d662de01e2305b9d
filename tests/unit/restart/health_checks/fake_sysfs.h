// A fake sysfs tree in a temporary directory: network interfaces, IB ports
// and PCI paths, for the NIC health check's tests.
#pragma once

#include <cstdint>
#include <string>

#include "tests/support/temp_dir.h"

namespace resilient::test {

class FakeSysfs {
 public:
  const std::string& root() const { return root_; }

  // Writes `content` + "\n" to <root>/<relative>, creating directories.
  void set(const std::string& relative, const std::string& content) const;
  void remove(const std::string& relative) const;

  // class/net/<name>: operstate, carrier, flags, carrier_changes, rx/tx errors.
  void addInterface(const std::string& name, const std::string& operstate = "up", int carrier = 1,
                    bool adminUp = true) const;
  void setCounter(const std::string& name, const std::string& counter, int64_t value) const;

  // class/infiniband/<dev>/ports/<port>: state, phys_state, link_downed,
  // link_error_recovery.
  void addIbPort(const std::string& device, int port, const std::string& state = "4: ACTIVE",
                 const std::string& physState = "5: LinkUp") const;
  void setIbCounter(const std::string& device, int port, const std::string& counter,
                    int64_t value) const;

  // devices/<pciPath> created; class/infiniband/<dev>/device links to it.
  void placeIbDevice(const std::string& device, const std::string& pciPath) const;
  // bus/pci/devices/<busId> links to devices/<pciPath>.
  void placeGpu(const std::string& busId, const std::string& pciPath) const;

 private:
  TempDir dir_;
  std::string root_ = dir_.path().string();
};

}  // namespace resilient::test
