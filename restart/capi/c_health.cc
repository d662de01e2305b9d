// resilient_restart_health_check_* (restart.h): the stock health checks of
// health.hpp as objects a program runs from its own health-check hook (the
// Python package's CudaHealthCheck, GpuRecoveryCheck, NicHealthCheck,
// FaultCounter).
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "resilient/restart.h"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/health.hpp"
#include "restart/capi/c_status.h"

namespace r = resilient::restart;
using r::capi::guarded;

struct resilient_restart_health_check {
  r::HealthCheckFn check;
};

namespace {

r::Mode modeOf(int mode) {
  switch (mode) {
    case RESILIENT_RESTART_MODE_ACTIVE: return r::Mode::kActive;
    case RESILIENT_RESTART_MODE_INACTIVE: return r::Mode::kInactive;
    case RESILIENT_RESTART_MODE_TERMINATED: return r::Mode::kTerminated;
    default: return r::Mode::kInitialized;
  }
}

// The C state as the C++ checks read it (fn_failed stands for the exception).
r::State stateOf(const resilient_restart_state& c) {
  r::State s;
  s.initialRank = c.initial_rank;
  s.initialWorldSize = c.initial_world_size;
  s.rank = c.rank;
  s.worldSize = c.world_size;
  s.activeRank = c.active_rank;
  s.activeWorldSize = c.active_world_size;
  s.iteration = c.iteration;
  s.mode = modeOf(c.mode);
  if (c.fn_failed != 0) {
    s.fnException = std::make_exception_ptr(r::RestartError("the function failed"));
  }
  s.culprit = c.culprit != 0;
  return s;
}

}  // namespace

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
    check->check(stateOf(*state));
    return 0;
  });
}

void resilient_restart_health_check_destroy(resilient_restart_health_check* check) {
  delete check;
}

}  // extern "C"
