// The one list of the restart options: every option of the C API
// (include/resilient/restart.h), in id order, with the Options field it sets
// and the NCCL_RESILIENT_* knob its default comes from. Everything else is
// expanded from it: Options::fromEnvironment (optionsFrom, options.cc), the
// C API's table of names, ids and types and its setters and getters
// (restart/capi/c_options.cc), the test that every default is its knob's
// (tests/unit/restart/loop/test_options.cc); Python reads the table and the
// defaults from the library at run time (python/nccl_resilient/wrapper.py).
//
//   OPTION(ID, name, member, knob): RESILIENT_RESTART_OPT_<ID>, its C name,
//     its field of Options (whose type gives the C type: int, bool and
//     Millis are integers, a Millis's name ends in "_ms"; std::string is a
//     string), and its knob (kNoKnob: none, the default is Options').
//   POLICY(ID, name, member): an option of the C API alone, a field of
//     resilient_restart_options (restart/capi/c_options.h) that the C API turns
//     into a policy or the retry controller when the wrapper is made (-1, or
//     never set: none).
//
// The C ids are an ABI: a new option gets a new id, an id is never reused.
// options.cc proves at compile time that each name is its id and its field in
// snake case (with "_ms" exactly for a duration). Not exported.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/params.h"

#define RESILIENT_RESTART_OPTIONS(OPTION, POLICY)                                                  \
  OPTION(RANK, "rank", rank, kNoKnob)                                                              \
  OPTION(WORLD_SIZE, "world_size", worldSize, kNoKnob)                                             \
  POLICY(MAX_ACTIVE_WORLD_SIZE, "max_active_world_size", maxActiveWorldSize)                       \
  POLICY(ACTIVE_WORLD_SIZE_DIVISIBLE_BY, "active_world_size_divisible_by",                         \
         activeWorldSizeDivisibleBy)                                                               \
  POLICY(MAX_ITERATIONS, "max_iterations", maxIterations)                                          \
  POLICY(MIN_WORLD_SIZE, "min_world_size", minWorldSize)                                           \
  POLICY(MIN_ACTIVE_WORLD_SIZE, "min_active_world_size", minActiveWorldSize)                       \
  OPTION(ENABLED, "enabled", enabled, config::kRestartEnabled)                                     \
  OPTION(USE_MONITOR_PROCESS, "use_monitor_process", useMonitorProcess,                            \
         config::kRestartMonitorProcess)                                                           \
  OPTION(TERMINATE_CULPRITS, "terminate_culprits", terminateCulprits,                              \
         config::kRestartTerminateCulprits)                                                        \
  OPTION(HOST_STORE, "host_store", hostStore, kNoKnob)                                             \
  OPTION(STORM_LIMIT, "storm_limit", stormLimit, config::kRestartStormLimit)                       \
  OPTION(AUTOMATIC_HEALTH_CHECKS, "automatic_health_checks", automaticHealthChecks,                \
         config::kRestartAutoHealthChecks)                                                         \
  OPTION(SOFT_TIMEOUT_MS, "soft_timeout_ms", softTimeout, config::kRestartSoftTimeoutMs)           \
  OPTION(HARD_TIMEOUT_MS, "hard_timeout_ms", hardTimeout, config::kRestartHardTimeoutMs)           \
  OPTION(BARRIER_TIMEOUT_MS, "barrier_timeout_ms", barrierTimeout,                                 \
         config::kRestartBarrierTimeoutMs)                                                         \
  OPTION(COMPLETION_TIMEOUT_MS, "completion_timeout_ms", completionTimeout,                        \
         config::kRestartCompletionTimeoutMs)                                                      \
  OPTION(HEARTBEAT_INTERVAL_MS, "heartbeat_interval_ms", heartbeatInterval,                        \
         config::kRestartHeartbeatIntervalMs)                                                      \
  OPTION(HEARTBEAT_TIMEOUT_MS, "heartbeat_timeout_ms", heartbeatTimeout,                           \
         config::kRestartHeartbeatTimeoutMs)                                                       \
  OPTION(MONITOR_THREAD_INTERVAL_MS, "monitor_thread_interval_ms", monitorThreadInterval,          \
         config::kRestartMonitorThreadIntervalMs)                                                  \
  OPTION(MONITOR_PROCESS_INTERVAL_MS, "monitor_process_interval_ms", monitorProcessInterval,       \
         config::kRestartMonitorProcessIntervalMs)                                                 \
  OPTION(PROGRESS_WATCHDOG_INTERVAL_MS, "progress_watchdog_interval_ms", progressWatchdogInterval, \
         config::kRestartProgressWatchdogIntervalMs)                                               \
  OPTION(TERMINATION_GRACE_TIME_MS, "termination_grace_time_ms", terminationGraceTime,             \
         config::kRestartTerminationGraceMs)                                                       \
  OPTION(FINALIZE_TIMEOUT_MS, "finalize_timeout_ms", finalizeTimeout,                              \
         config::kRestartFinalizeTimeoutMs)                                                        \
  OPTION(HEALTH_CHECK_TIMEOUT_MS, "health_check_timeout_ms", healthCheckTimeout,                   \
         config::kRestartHealthCheckTimeoutMs)                                                     \
  OPTION(COMMUNICATOR_TIMEOUT_MS, "communicator_timeout_ms", communicatorTimeout,                  \
         config::kRestartCommunicatorTimeoutMs)                                                    \
  OPTION(STORM_WINDOW_MS, "storm_window_ms", stormWindow, config::kRestartStormWindowMs)           \
  OPTION(RESTART_BACKOFF_MS, "restart_backoff_ms", restartBackoff, config::kRestartBackoffMs)      \
  OPTION(RESTART_BACKOFF_MAX_MS, "restart_backoff_max_ms", restartBackoffMax,                      \
         config::kRestartBackoffMaxMs)                                                             \
  OPTION(STORE_URL, "store_url", storeUrl, config::kStoreUrl)                                      \
  OPTION(JOB_ID, "job_id", jobId, config::kRestartJob)                                             \
  OPTION(MONITOR_EXECUTABLE, "monitor_executable", monitorExecutable, kNoKnob)                     \
  OPTION(MONITOR_LOG_FILE, "monitor_log_file", monitorLogFile, kNoKnob)                            \
  OPTION(MONITOR_PID_FILE, "monitor_pid_file", monitorPidFile, kNoKnob)                            \
  OPTION(BLACKBOX_DIR, "blackbox_dir", blackboxDir, config::kBlackboxDir)                          \
  OPTION(HEALTH_INTERVAL_MS, "health_interval_ms", healthInterval, config::kHealthIntervalMs)      \
  OPTION(SLOW_LINK_PERCENT, "slow_link_percent", slowLinkPercent, config::kSlowLinkPercent)        \
  OPTION(SLOW_LINK_WINDOW_MS, "slow_link_window_ms", slowLinkWindow, config::kSlowLinkWindowMs)    \
  OPTION(SLOW_LINK_RESTART, "slow_link_restart", slowLinkRestart, config::kSlowLinkAction)         \
  OPTION(STRAGGLER_LAG_MS, "straggler_lag_ms", stragglerLag, config::kStragglerLagMs)              \
  OPTION(STRAGGLER_WINDOW_MS, "straggler_window_ms", stragglerWindow, config::kStragglerWindowMs)  \
  OPTION(STRAGGLER_RESTART, "straggler_restart", stragglerRestart, config::kStragglerAction)       \
  OPTION(STUCK_RANK_TIMEOUT_MS, "stuck_rank_timeout_ms", stuckRankTimeout,                         \
         config::kStuckRankTimeoutMs)                                                              \
  OPTION(STUCK_RANK_RESTART, "stuck_rank_restart", stuckRankRestart, config::kStuckRankAction)

namespace resilient::restart {

// The knob column of an option that has none.
struct NoKnob {};
inline constexpr NoKnob kNoKnob{};

template <const auto& K>
inline constexpr bool kHasKnob = !std::is_same_v<std::remove_cvref_t<decltype(K)>, NoKnob>;

// An option's field from its knob's value: the types that go together (a
// health action knob sets a bool: restart or not); any other pair does not
// compile.
inline void assignKnob(std::chrono::milliseconds& field, int64_t value) {
  field = std::chrono::milliseconds(value);
}
inline void assignKnob(int& field, int64_t value) {
  field = static_cast<int>(value);
}
inline void assignKnob(bool& field, bool value) {
  field = value;
}
inline void assignKnob(bool& field, config::HealthAction value) {
  field = value == config::HealthAction::kRestart;
}
inline void assignKnob(std::string& field, const std::string& value) {
  field = value;
}
template <class Field, class Value>
void assignKnob(Field& field, const Value& value) = delete;

// `field` = the knob K as `params` resolve it; nothing for kNoKnob.
template <const auto& K, class T>
void readKnob(T& field, const config::Params& params) {
  if constexpr (kHasKnob<K>) {
    assignKnob(field, params.get<K>());
  }
}

// The knob K's variable, or nullptr for kNoKnob.
template <const auto& K>
constexpr const char* knobName() noexcept {
  if constexpr (kHasKnob<K>) {
    return K.spec().name;
  } else {
    return nullptr;
  }
}

// "SOFT_TIMEOUT_MS" and "soft_timeout_ms".
consteval bool isNameOfId(std::string_view id, std::string_view name) {
  if (id.size() != name.size()) {
    return false;
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i] >= 'A' && id[i] <= 'Z' ? static_cast<char>(id[i] - 'A' + 'a') : id[i];
    if (c != name[i]) {
      return false;
    }
  }
  return true;
}

// "softTimeout" and "soft_timeout_ms" (a duration) or "soft_timeout".
consteval bool isNameOfField(std::string_view field, std::string_view name, bool duration) {
  size_t at = 0;
  const auto next = [&](char c) { return at < name.size() && name[at++] == c; };
  for (const char c : field) {
    const bool upper = c >= 'A' && c <= 'Z';
    if (upper ? !next('_') || !next(static_cast<char>(c - 'A' + 'a')) : !next(c)) {
      return false;
    }
  }
  if (duration && !(next('_') && next('m') && next('s'))) {
    return false;
  }
  return at == name.size();
}

}  // namespace resilient::restart
