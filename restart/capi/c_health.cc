// resilient_restart_health_check_* (restart.h): the stock health checks of
// health.hpp as objects a program runs from its own health-check hook (the
// Python package's CudaHealthCheck, GpuRecoveryCheck, NicHealthCheck,
// FaultCounter), and the stock initialize hook, the retry controller, as one
// (nccl_resilient.inprocess's RetryController).
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "resilient/restart.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "resilient/restart/hooks.hpp"
#include "restart/capi/c_options.h"
#include "restart/capi/c_status.h"

namespace r = resilient::restart;
using r::capi::guarded;

struct resilient_restart_health_check {
  r::HealthCheckFn check;
};

extern "C" {

resilient_restart_health_check* resilient_restart_health_check_stock(const char* name,
                                                                     long long argument) {
  resilient_restart_health_check* out = nullptr;
  guarded([&] {
    const std::string n = name != nullptr ? name : "";
    r::HealthCheckFn check;
    if (n == "cuda") {
      std::optional<std::chrono::milliseconds> timeout;
      if (argument >= 0) {
        timeout = std::chrono::milliseconds(argument);
      }
      check = r::cudaHealthCheck(timeout);
    } else if (n == "gpu_recovery") {
      r::GpuRecoveryOptions options;
      options.failOnNvLinkDown = argument > 0;
      check = r::gpuRecoveryCheck(options);
    } else if (n == "nic") {
      r::NicCheckOptions options;
      if (argument >= 0) {
        options.errorThreshold = argument;
      }
      check = r::nicHealthCheck(options);
    } else if (n == "fault_counter") {
      if (argument < 0 || argument > (1 << 30)) {
        throw r::ConfigError("fault_counter: the largest number of faults must be 0 or more, not " +
                             std::to_string(argument));
      }
      check = r::faultCounter(static_cast<int>(argument));
    } else {
      throw r::ConfigError("no stock health check '" + n +
                           "' (cuda, gpu_recovery, nic, fault_counter)");
    }
    out = new resilient_restart_health_check{std::move(check)};
    return 0;
  });
  return out;
}

int resilient_restart_health_check_run(resilient_restart_health_check* check,
                                       const resilient_restart_state* state) {
  return guarded([&] {
    if (check == nullptr || state == nullptr) {
      throw r::ConfigError("health_check_run: null check or state");
    }
    check->check(r::capi::fromC(*state));
    return 0;
  });
}

void resilient_restart_health_check_destroy(resilient_restart_health_check* check) {
  delete check;
}

resilient_restart_health_check* resilient_restart_retry_controller(long long max_iterations,
                                                                   int min_world_size,
                                                                   int min_active_world_size) {
  resilient_restart_health_check* out = nullptr;
  guarded([&] {
    if (max_iterations < -1 || max_iterations > (1 << 30)) {
      throw r::ConfigError(
          "retry_controller: max_iterations must be -1 (no limit) or at least 1, "
          "not " +
          std::to_string(max_iterations));
    }
    std::optional<int> most;
    if (max_iterations >= 0) {
      most = static_cast<int>(max_iterations);
    }
    out = new resilient_restart_health_check{
        r::retryController(most, min_world_size, min_active_world_size)};
    return 0;
  });
  return out;
}

}  // extern "C"
