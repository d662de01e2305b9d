// The stock health checks (docs/reference/restart-model.md §1.2, "Health check"): factories
// returning a HealthCheckFn (hooks.hpp) that throws HealthCheckError, with a
// message naming what is wrong, when this rank is unfit to go on. Compose them
// with composeHealthChecks().
//
// Every check is safe to run on a machine without a GPU, NVML or InfiniBand:
// a check that was asked for but cannot run says so in its HealthCheckError;
// cudaAvailable() and nvmlAvailable() let an automatic chain leave the GPU
// checks out instead. docs/restart.md ("Health checks") has the details.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "resilient/restart/hooks.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

// --- CUDA -----------------------------------------------------------------

// True when a CUDA runtime can be loaded (the one the process uses, else
// libcudart.so.13/.12/libcudart.so) and it reports at least one device. This
// loads the runtime and initialises the driver in the process: call it after
// the monitor process was spawned, like any CUDA call.
bool cudaAvailable() noexcept;

// The PCI bus id ("0000:17:00.0") of CUDA device `device` (-1: LOCAL_RANK,
// else the calling thread's current device); empty when there is no CUDA
// runtime or device. Feeds NicCheckOptions::gpuPciBusId.
std::string cudaDevicePciBusId(int device = -1);

// Synchronizes the device twice (the reference's CudaHealthCheck): first on a
// thread bounded by `timeout` (pending kernels cannot be cancelled, so this
// waits for the whole queue; overrunning throws TimeoutError), then once more
// to surface a corrupted context (HealthCheckError with CUDA's error text).
// `timeout`: nullopt reads NCCL_RESILIENT_HEALTH_CUDA_TIMEOUT_MS (30 s).
// `device`: -1 uses LOCAL_RANK when set, else the calling thread's current
// device. Without a CUDA runtime or device the check throws HealthCheckError.
HealthCheckFn cudaHealthCheck(std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                              int device = -1);

// --- GPU recovery action and NVLink (NVML) ---------------------------------

// True when libnvidia-ml.so.1 loads and initialises.
bool nvmlAvailable() noexcept;

struct GpuRecoveryOptions {
  // CUDA device (-1: LOCAL_RANK, else the current device); mapped to NVML's
  // device by PCI bus id when the CUDA runtime is available, else used as
  // NVML's index.
  int device = -1;
  // NVLink links that are not active: false (the default) reports them with a
  // WARN and passes, as the reference ignores NVLink failures; true fails.
  bool failOnNvLinkDown = false;
};

// NVML's recovery action field for the GPU (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
// driver >= 570): NONE passes; GPU_RESET, NODE_REBOOT, DRAIN_P2P and
// DRAIN_AND_RESET fail naming the action. A driver without the field passes
// with an INFO line. Then the NVLink state of every link the GPU has.
HealthCheckFn gpuRecoveryCheck(GpuRecoveryOptions options = {});

// --- NICs (sysfs) -----------------------------------------------------------

struct NicCheckOptions {
  // Ethernet interfaces by exact name. Empty: the interfaces that
  // NCCL_RESILIENT_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) selects, in its
  // syntax ("eth", "^docker,lo", "=eth0"); both unset: NCCL's default choice
  // ("ib*", else all but "docker*" and "lo", else "docker*", else "lo").
  std::vector<std::string> interfaces;
  // Used when `interfaces` is empty: a selection in NCCL_SOCKET_IFNAME syntax
  // instead of the knob's.
  std::optional<std::string> interfaceSpec;
  bool checkEthernet = true;
  // InfiniBand devices, "mlx5_0" (every port) or "mlx5_0:1" (one port).
  // Empty: the devices closest to gpuPciBusId in the PCI tree when it is set,
  // else every device.
  std::vector<std::string> ibDevices;
  std::string gpuPciBusId;
  bool checkInfiniband = true;
  // Largest increase allowed between two checks of: rx_errors + tx_errors of
  // an Ethernet interface, link_error_recovery of an IB port. nullopt reads
  // NCCL_RESILIENT_HEALTH_NIC_ERROR_THRESHOLD.
  std::optional<int64_t> errorThreshold;
  // Largest increase allowed of an interface's carrier_changes and of an IB
  // port's link_downed (0: any flap fails, as the reference's link_downed check).
  int64_t carrierChangeThreshold = 0;
  int64_t linkDownedThreshold = 0;
  // Where sysfs is mounted (tests point this at a fake tree).
  std::string sysfsRoot = "/sys";
};

// Link state and error counters of the NICs from sysfs. The interfaces and
// ports are chosen when the check is made and their counters read then, so
// the first call already compares against that baseline; each call then
// compares against the previous one. Named interfaces and ports must be up
// on every call; ones chosen by default (NCCL's selection, every IB port) are
// only kept when they are up at the start, so a port never cabled does not
// fail every check. Fails on: a missing interface or device, operstate not
// up, no carrier, an IB port not ACTIVE, counters grown past the thresholds.
HealthCheckFn nicHealthCheck(NicCheckOptions options = {});

// --- Fault counter ----------------------------------------------------------

// Counts the iterations in which this rank faulted (State::fnException set,
// or State::culprit) and throws FaultCounterExceeded once there are more than
// `maxRankFaults` (0: the first fault ends the rank). Negative: ConfigError.
HealthCheckFn faultCounter(int maxRankFaults);

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
