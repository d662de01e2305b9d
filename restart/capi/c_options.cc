// resilient_restart_options_* (restart.h).
#include "restart/capi/c_options.h"

#include <cstring>
#include <iterator>
#include <string>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/host_communicator.hpp"
#include "restart/capi/c_status.h"

namespace resilient::restart::capi {

int modeToC(Mode mode) noexcept {
  switch (mode) {
    case Mode::kActive: return RESILIENT_RESTART_MODE_ACTIVE;
    case Mode::kInactive: return RESILIENT_RESTART_MODE_INACTIVE;
    case Mode::kTerminated: return RESILIENT_RESTART_MODE_TERMINATED;
    case Mode::kInitialized: break;
  }
  return RESILIENT_RESTART_MODE_INITIALIZED;
}

std::optional<Mode> modeFromC(int mode) noexcept {
  switch (mode) {
    case RESILIENT_RESTART_MODE_ACTIVE: return Mode::kActive;
    case RESILIENT_RESTART_MODE_INACTIVE: return Mode::kInactive;
    case RESILIENT_RESTART_MODE_TERMINATED: return Mode::kTerminated;
    case RESILIENT_RESTART_MODE_INITIALIZED: return Mode::kInitialized;
    default: return std::nullopt;
  }
}

State fromC(const resilient_restart_state& c) {
  State s;
  s.initialRank = c.initial_rank;
  s.initialWorldSize = c.initial_world_size;
  s.rank = c.rank;
  s.worldSize = c.world_size;
  s.activeRank = c.active_rank;
  s.activeWorldSize = c.active_world_size;
  s.iteration = c.iteration;
  s.mode = modeFromC(c.mode).value_or(Mode::kInitialized);
  if (c.fn_failed != 0) {
    s.fnException = std::make_exception_ptr(RestartError("the function failed"));
  }
  s.culprit = c.culprit != 0;
  return s;
}

resilient_restart_state toC(const State& s) noexcept {
  resilient_restart_state c{};
  c.initial_rank = s.initialRank;
  c.initial_world_size = s.initialWorldSize;
  c.rank = s.rank;
  c.world_size = s.worldSize;
  c.active_rank = s.activeRank;
  c.active_world_size = s.activeWorldSize;
  c.iteration = s.iteration;
  c.mode = modeToC(s.mode);
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
    takeCallbackError();
    const int rc = hook(&c, user);
    if (rc == 0) {
      takeCallbackError();
      return;
    }
    const std::string what = callbackFailure("the C hook returned " + std::to_string(rc) + " (" +
                                             resilient_restart_status_name(rc) + ")");
    if (rc == RESILIENT_RESTART_ABORTED) {
      throw RestartAbort(what);
    }
    if (kind == RESILIENT_RESTART_HOOK_HEALTH_CHECK) {
      throw HealthCheckError(what);
    }
    throw RestartError(what);
  };
}

// Every option of the C API, in id order: the one table of names, ids and types.
constexpr int kInt = RESILIENT_RESTART_OPTION_INT;
constexpr int kString = RESILIENT_RESTART_OPTION_STRING;
constexpr resilient_restart_option_info kOptionTable[] = {
    {"rank", RESILIENT_RESTART_OPT_RANK, kInt},
    {"world_size", RESILIENT_RESTART_OPT_WORLD_SIZE, kInt},
    {"max_active_world_size", RESILIENT_RESTART_OPT_MAX_ACTIVE_WORLD_SIZE, kInt},
    {"active_world_size_divisible_by", RESILIENT_RESTART_OPT_ACTIVE_WORLD_SIZE_DIVISIBLE_BY, kInt},
    {"max_iterations", RESILIENT_RESTART_OPT_MAX_ITERATIONS, kInt},
    {"min_world_size", RESILIENT_RESTART_OPT_MIN_WORLD_SIZE, kInt},
    {"min_active_world_size", RESILIENT_RESTART_OPT_MIN_ACTIVE_WORLD_SIZE, kInt},
    {"enabled", RESILIENT_RESTART_OPT_ENABLED, kInt},
    {"use_monitor_process", RESILIENT_RESTART_OPT_USE_MONITOR_PROCESS, kInt},
    {"terminate_culprits", RESILIENT_RESTART_OPT_TERMINATE_CULPRITS, kInt},
    {"host_store", RESILIENT_RESTART_OPT_HOST_STORE, kInt},
    {"storm_limit", RESILIENT_RESTART_OPT_STORM_LIMIT, kInt},
    {"automatic_health_checks", RESILIENT_RESTART_OPT_AUTOMATIC_HEALTH_CHECKS, kInt},
    {"soft_timeout_ms", RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS, kInt},
    {"hard_timeout_ms", RESILIENT_RESTART_OPT_HARD_TIMEOUT_MS, kInt},
    {"barrier_timeout_ms", RESILIENT_RESTART_OPT_BARRIER_TIMEOUT_MS, kInt},
    {"completion_timeout_ms", RESILIENT_RESTART_OPT_COMPLETION_TIMEOUT_MS, kInt},
    {"heartbeat_interval_ms", RESILIENT_RESTART_OPT_HEARTBEAT_INTERVAL_MS, kInt},
    {"heartbeat_timeout_ms", RESILIENT_RESTART_OPT_HEARTBEAT_TIMEOUT_MS, kInt},
    {"last_call_wait_ms", RESILIENT_RESTART_OPT_LAST_CALL_WAIT_MS, kInt},
    {"monitor_thread_interval_ms", RESILIENT_RESTART_OPT_MONITOR_THREAD_INTERVAL_MS, kInt},
    {"monitor_process_interval_ms", RESILIENT_RESTART_OPT_MONITOR_PROCESS_INTERVAL_MS, kInt},
    {"progress_watchdog_interval_ms", RESILIENT_RESTART_OPT_PROGRESS_WATCHDOG_INTERVAL_MS, kInt},
    {"termination_grace_time_ms", RESILIENT_RESTART_OPT_TERMINATION_GRACE_TIME_MS, kInt},
    {"finalize_timeout_ms", RESILIENT_RESTART_OPT_FINALIZE_TIMEOUT_MS, kInt},
    {"health_check_timeout_ms", RESILIENT_RESTART_OPT_HEALTH_CHECK_TIMEOUT_MS, kInt},
    {"communicator_timeout_ms", RESILIENT_RESTART_OPT_COMMUNICATOR_TIMEOUT_MS, kInt},
    {"storm_window_ms", RESILIENT_RESTART_OPT_STORM_WINDOW_MS, kInt},
    {"restart_backoff_ms", RESILIENT_RESTART_OPT_RESTART_BACKOFF_MS, kInt},
    {"restart_backoff_max_ms", RESILIENT_RESTART_OPT_RESTART_BACKOFF_MAX_MS, kInt},
    {"store_url", RESILIENT_RESTART_OPT_STORE_URL, kString},
    {"job_id", RESILIENT_RESTART_OPT_JOB_ID, kString},
    {"monitor_executable", RESILIENT_RESTART_OPT_MONITOR_EXECUTABLE, kString},
    {"monitor_log_file", RESILIENT_RESTART_OPT_MONITOR_LOG_FILE, kString},
    {"monitor_pid_file", RESILIENT_RESTART_OPT_MONITOR_PID_FILE, kString},
    {"blackbox_dir", RESILIENT_RESTART_OPT_BLACKBOX_DIR, kString},
};

// The duration an option id sets, or nullptr.
Millis Options::*durationMember(int id) noexcept {
  switch (id) {
    case RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS: return &Options::softTimeout;
    case RESILIENT_RESTART_OPT_HARD_TIMEOUT_MS: return &Options::hardTimeout;
    case RESILIENT_RESTART_OPT_BARRIER_TIMEOUT_MS: return &Options::barrierTimeout;
    case RESILIENT_RESTART_OPT_COMPLETION_TIMEOUT_MS: return &Options::completionTimeout;
    case RESILIENT_RESTART_OPT_HEARTBEAT_INTERVAL_MS: return &Options::heartbeatInterval;
    case RESILIENT_RESTART_OPT_HEARTBEAT_TIMEOUT_MS: return &Options::heartbeatTimeout;
    case RESILIENT_RESTART_OPT_LAST_CALL_WAIT_MS: return &Options::lastCallWait;
    case RESILIENT_RESTART_OPT_MONITOR_THREAD_INTERVAL_MS: return &Options::monitorThreadInterval;
    case RESILIENT_RESTART_OPT_MONITOR_PROCESS_INTERVAL_MS: return &Options::monitorProcessInterval;
    case RESILIENT_RESTART_OPT_PROGRESS_WATCHDOG_INTERVAL_MS:
      return &Options::progressWatchdogInterval;
    case RESILIENT_RESTART_OPT_TERMINATION_GRACE_TIME_MS: return &Options::terminationGraceTime;
    case RESILIENT_RESTART_OPT_FINALIZE_TIMEOUT_MS: return &Options::finalizeTimeout;
    case RESILIENT_RESTART_OPT_HEALTH_CHECK_TIMEOUT_MS: return &Options::healthCheckTimeout;
    case RESILIENT_RESTART_OPT_COMMUNICATOR_TIMEOUT_MS: return &Options::communicatorTimeout;
    case RESILIENT_RESTART_OPT_STORM_WINDOW_MS: return &Options::stormWindow;
    case RESILIENT_RESTART_OPT_RESTART_BACKOFF_MS: return &Options::restartBackoff;
    case RESILIENT_RESTART_OPT_RESTART_BACKOFF_MAX_MS: return &Options::restartBackoffMax;
    default: return nullptr;
  }
}

// The option `id` when it has `type`; ConfigError naming it otherwise.
const resilient_restart_option_info& optionOfType(int id, int type) {
  const resilient_restart_option_info* info = resilient_restart_option_by_id(id);
  if (info == nullptr) {
    throw ConfigError("no option has id " + std::to_string(id));
  }
  if (info->type != type) {
    throw ConfigError(std::string("option ") + info->name + " is " +
                      (info->type == RESILIENT_RESTART_OPTION_INT ? "an integer" : "a string") +
                      ": set it with resilient_restart_options_set_" +
                      (info->type == RESILIENT_RESTART_OPTION_INT ? "int" : "string"));
  }
  return *info;
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
  if (!policies.empty() && rankAssignmentSet) {
    throw r::ConfigError(
        "max_active_world_size / active_world_size_divisible_by and an explicit rank "
        "assignment (set_rank_assignment) were both given: put the filters in the policy list");
  }
  if (!policies.empty()) {
    policies.push_back(r::activateAllRanks());
    policies.push_back(r::shiftRanks());
    o.rankAssignment = r::compose(std::move(policies));
  }
  if (maxIterations || minWorldSize || minActiveWorldSize) {
    o.initialize = r::composeInitialize({r::retryController(maxIterations, minWorldSize.value_or(1),
                                                            minActiveWorldSize.value_or(1)),
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

void resilient_restart_options_destroy(resilient_restart_options* options) {
  delete options;
}

const resilient_restart_option_info* resilient_restart_option_by_name(const char* name) {
  if (name == nullptr) {
    return nullptr;
  }
  for (const resilient_restart_option_info& info : kOptionTable) {
    if (std::strcmp(info.name, name) == 0) {
      return &info;
    }
  }
  return nullptr;
}

const resilient_restart_option_info* resilient_restart_option_by_id(int id) {
  for (const resilient_restart_option_info& info : kOptionTable) {
    if (info.id == id) {
      return &info;
    }
  }
  return nullptr;
}

const resilient_restart_option_info* resilient_restart_option_next(
    const resilient_restart_option_info* previous) {
  const auto* first = std::begin(kOptionTable);
  const auto* end = std::end(kOptionTable);
  if (previous == nullptr) {
    return first;
  }
  if (previous < first || previous + 1 >= end) {
    return nullptr;
  }
  return previous + 1;
}

int resilient_restart_options_set_int(resilient_restart_options* o, int option, long long value) {
  return guarded([&] {
    if (o == nullptr) {
      throw resilient::restart::ConfigError("set_int: null options");
    }
    const resilient_restart_option_info& info = optionOfType(option, RESILIENT_RESTART_OPTION_INT);
    Options& opt = o->options;
    if (Millis Options::*duration = durationMember(option)) {
      opt.*duration = Millis(value);
      return 0;
    }
    const auto asInt = [&]() {
      if (value < -1 || value > (1LL << 30)) {
        throw resilient::restart::ConfigError(std::string("option ") + info.name + ": " +
                                              std::to_string(value) + " is out of range");
      }
      return static_cast<int>(value);
    };
    switch (option) {
      case RESILIENT_RESTART_OPT_RANK: opt.rank = asInt(); break;
      case RESILIENT_RESTART_OPT_WORLD_SIZE: opt.worldSize = asInt(); break;
      case RESILIENT_RESTART_OPT_MAX_ACTIVE_WORLD_SIZE: o->maxActiveWorldSize = asInt(); break;
      case RESILIENT_RESTART_OPT_ACTIVE_WORLD_SIZE_DIVISIBLE_BY:
        o->activeWorldSizeDivisibleBy = asInt();
        break;
      case RESILIENT_RESTART_OPT_MAX_ITERATIONS: o->maxIterations = asInt(); break;
      case RESILIENT_RESTART_OPT_MIN_WORLD_SIZE: o->minWorldSize = asInt(); break;
      case RESILIENT_RESTART_OPT_MIN_ACTIVE_WORLD_SIZE: o->minActiveWorldSize = asInt(); break;
      case RESILIENT_RESTART_OPT_ENABLED: opt.enabled = value != 0; break;
      case RESILIENT_RESTART_OPT_USE_MONITOR_PROCESS: opt.useMonitorProcess = value != 0; break;
      case RESILIENT_RESTART_OPT_TERMINATE_CULPRITS: opt.terminateCulprits = value != 0; break;
      case RESILIENT_RESTART_OPT_HOST_STORE: opt.hostStore = value != 0; break;
      case RESILIENT_RESTART_OPT_STORM_LIMIT: opt.stormLimit = asInt(); break;
      case RESILIENT_RESTART_OPT_AUTOMATIC_HEALTH_CHECKS:
        opt.automaticHealthChecks = value != 0;
        break;
      default:
        throw resilient::restart::InternalError(std::string("set_int: option ") + info.name +
                                                " has no setter");
    }
    return 0;
  });
}

int resilient_restart_options_set_string(resilient_restart_options* o, int option,
                                         const char* value) {
  return guarded([&] {
    if (o == nullptr || value == nullptr) {
      throw resilient::restart::ConfigError("set_string: null options or value");
    }
    optionOfType(option, RESILIENT_RESTART_OPTION_STRING);
    Options& opt = o->options;
    switch (option) {
      case RESILIENT_RESTART_OPT_STORE_URL: opt.storeUrl = value; break;
      case RESILIENT_RESTART_OPT_JOB_ID: opt.jobId = value; break;
      case RESILIENT_RESTART_OPT_MONITOR_EXECUTABLE: opt.monitorExecutable = value; break;
      case RESILIENT_RESTART_OPT_MONITOR_LOG_FILE: opt.monitorLogFile = value; break;
      case RESILIENT_RESTART_OPT_MONITOR_PID_FILE: opt.monitorPidFile = value; break;
      case RESILIENT_RESTART_OPT_BLACKBOX_DIR: opt.blackboxDir = value; break;
      default: break;  // optionOfType accepted only these
    }
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

int resilient_restart_options_add_host_communicator(resilient_restart_options* o, const char* name,
                                                    const char* plugin) {
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
