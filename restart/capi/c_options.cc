// resilient_restart_options_* (restart.h).
#include "restart/capi/c_options.h"

#include <cstring>
#include <map>
#include <string>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/host_communicator.hpp"
#include "restart/capi/c_status.h"

namespace resilient::restart::capi {

resilient_restart_state toC(const State& s) noexcept {
  resilient_restart_state c{};
  c.initial_rank = s.initialRank;
  c.initial_world_size = s.initialWorldSize;
  c.rank = s.rank;
  c.world_size = s.worldSize;
  c.active_rank = s.activeRank;
  c.active_world_size = s.activeWorldSize;
  c.iteration = s.iteration;
  switch (s.mode) {
    case Mode::kActive: c.mode = RESILIENT_RESTART_MODE_ACTIVE; break;
    case Mode::kInactive: c.mode = RESILIENT_RESTART_MODE_INACTIVE; break;
    case Mode::kTerminated: c.mode = RESILIENT_RESTART_MODE_TERMINATED; break;
    case Mode::kInitialized: c.mode = RESILIENT_RESTART_MODE_INITIALIZED; break;
  }
  c.fn_failed = s.fnException ? 1 : 0;
  c.culprit = s.culprit ? 1 : 0;
  return c;
}

namespace {

std::function<void(const State&)> wrapHook(resilient_restart_hook hook, void* user, int kind) {
  if (hook == nullptr) {
    return {};
  }
  return [hook, user, kind](const State& state) {
    const resilient_restart_state c = toC(state);
    const int rc = hook(&c, user);
    if (rc == 0) {
      return;
    }
    const std::string what = "the C hook returned " + std::to_string(rc) + " (" +
                             resilient_restart_status_name(rc) + ")";
    if (rc == RESILIENT_RESTART_ABORTED) {
      throw RestartAbort(what);
    }
    if (kind == RESILIENT_RESTART_HOOK_HEALTH_CHECK) {
      throw HealthCheckError(what);
    }
    throw RestartError(what);
  };
}

}  // namespace

}  // namespace resilient::restart::capi

using resilient::restart::Millis;
using resilient::restart::Options;
using namespace resilient::restart::capi;

resilient::restart::Options resilient_restart_options::resolved() const {
  namespace r = resilient::restart;
  Options o = options;
  std::vector<r::RankAssignmentPtr> policies;
  if (maxActiveWorldSize) {
    policies.push_back(r::maxActiveWorldSize(*maxActiveWorldSize));
  }
  if (activeWorldSizeDivisibleBy) {
    policies.push_back(r::activeWorldSizeDivisibleBy(*activeWorldSizeDivisibleBy));
  }
  if (!policies.empty()) {
    policies.push_back(r::activateAllRanks());
    policies.push_back(r::shiftRanks());
    o.rankAssignment = r::compose(std::move(policies));
  }
  if (maxIterations || minWorldSize || minActiveWorldSize) {
    o.initialize = r::composeInitialize(
        {r::retryController(maxIterations, minWorldSize.value_or(1), minActiveWorldSize.value_or(1)),
         o.initialize});
  }
  return o;
}

extern "C" {

resilient_restart_options* resilient_restart_options_from_environment(void) {
  resilient_restart_options* out = nullptr;
  guarded([&] {
    out = new resilient_restart_options{Options::fromEnvironment(), {}, {}, {}, {}, {}};
    return 0;
  });
  return out;
}

void resilient_restart_options_destroy(resilient_restart_options* options) { delete options; }

int resilient_restart_options_set_int(resilient_restart_options* o, const char* name,
                                      long long value) {
  return guarded([&] {
    if (o == nullptr || name == nullptr) {
      throw resilient::restart::ConfigError("set_int: null options or name");
    }
    Options& opt = o->options;
    const std::map<std::string, Millis*> durations = {
        {"soft_timeout_ms", &opt.softTimeout},
        {"hard_timeout_ms", &opt.hardTimeout},
        {"barrier_timeout_ms", &opt.barrierTimeout},
        {"completion_timeout_ms", &opt.completionTimeout},
        {"heartbeat_interval_ms", &opt.heartbeatInterval},
        {"heartbeat_timeout_ms", &opt.heartbeatTimeout},
        {"last_call_wait_ms", &opt.lastCallWait},
        {"monitor_thread_interval_ms", &opt.monitorThreadInterval},
        {"monitor_process_interval_ms", &opt.monitorProcessInterval},
        {"progress_watchdog_interval_ms", &opt.progressWatchdogInterval},
        {"termination_grace_time_ms", &opt.terminationGraceTime},
        {"finalize_timeout_ms", &opt.finalizeTimeout},
        {"health_check_timeout_ms", &opt.healthCheckTimeout},
        {"communicator_timeout_ms", &opt.communicatorTimeout},
    };
    const std::string n = name;
    if (auto it = durations.find(n); it != durations.end()) {
      *it->second = Millis(value);
      return 0;
    }
    const auto asInt = [&]() {
      if (value < -1 || value > (1LL << 30)) {
        throw resilient::restart::ConfigError("option " + n + ": " + std::to_string(value) +
                                              " is out of range");
      }
      return static_cast<int>(value);
    };
    if (n == "rank") {
      opt.rank = asInt();
    } else if (n == "world_size") {
      opt.worldSize = asInt();
    } else if (n == "max_active_world_size") {
      o->maxActiveWorldSize = asInt();
    } else if (n == "active_world_size_divisible_by") {
      o->activeWorldSizeDivisibleBy = asInt();
    } else if (n == "max_iterations") {
      o->maxIterations = asInt();
    } else if (n == "min_world_size") {
      o->minWorldSize = asInt();
    } else if (n == "min_active_world_size") {
      o->minActiveWorldSize = asInt();
    } else if (n == "enabled") {
      opt.enabled = value != 0;
    } else if (n == "use_monitor_process") {
      opt.useMonitorProcess = value != 0;
    } else if (n == "terminate_culprits") {
      opt.terminateCulprits = value != 0;
    } else if (n == "host_store") {
      opt.hostStore = value != 0;
    } else {
      throw resilient::restart::ConfigError("no integer option is named \"" + n + "\"");
    }
    return 0;
  });
}

int resilient_restart_options_set_string(resilient_restart_options* o, const char* name,
                                         const char* value) {
  return guarded([&] {
    if (o == nullptr || name == nullptr || value == nullptr) {
      throw resilient::restart::ConfigError("set_string: null options, name or value");
    }
    Options& opt = o->options;
    const std::map<std::string, std::string*> strings = {
        {"store_url", &opt.storeUrl},
        {"job_id", &opt.jobId},
        {"monitor_executable", &opt.monitorExecutable},
        {"monitor_log_file", &opt.monitorLogFile},
        {"monitor_pid_file", &opt.monitorPidFile},
        {"blackbox_dir", &opt.blackboxDir},
    };
    const auto it = strings.find(name);
    if (it == strings.end()) {
      throw resilient::restart::ConfigError(std::string("no string option is named \"") + name +
                                            "\"");
    }
    *it->second = value;
    return 0;
  });
}

int resilient_restart_options_set_hook(resilient_restart_options* o, int kind,
                                       resilient_restart_hook hook, void* user) {
  return guarded([&] {
    if (o == nullptr) {
      throw resilient::restart::ConfigError("set_hook: null options");
    }
    auto fn = resilient::restart::capi::wrapHook(hook, user, kind);
    Options& opt = o->options;
    switch (kind) {
      case RESILIENT_RESTART_HOOK_INITIALIZE: opt.initialize = fn; break;
      case RESILIENT_RESTART_HOOK_ABORT:
        // An abort must not throw: failures are reported by the loop's log.
        opt.abort = fn;
        break;
      case RESILIENT_RESTART_HOOK_FINALIZE: opt.finalize = fn; break;
      case RESILIENT_RESTART_HOOK_HEALTH_CHECK: opt.healthCheck = fn; break;
      case RESILIENT_RESTART_HOOK_COMPLETION: opt.completion = fn; break;
      case RESILIENT_RESTART_HOOK_TERMINATE: opt.terminate = fn; break;
      default:
        throw resilient::restart::ConfigError("set_hook: no hook kind " + std::to_string(kind));
    }
    return 0;
  });
}

int resilient_restart_options_add_host_communicator(resilient_restart_options* o,
                                                    const char* name, const char* plugin) {
  return guarded([&] {
    if (o == nullptr || name == nullptr) {
      throw resilient::restart::ConfigError("add_host_communicator: null options or name");
    }
    resilient::restart::HostCommunicatorOptions host;
    if (plugin != nullptr) {
      host.plugin = plugin;
    }
    o->options.communicators.emplace_back(name, resilient::restart::hostCommunicatorFactory(host));
    return 0;
  });
}

}  // extern "C"
