// The constants of the C API (include/resilient/restart.h) listed once, each
// with its name: the enumerators of its enums and the fields of its structs.
// resilient_restart_constant_next (c_constants.cc) gives them to bindings
// that read them at run time (the Python package), resilient_restart_status_name
// and resilient_restart_options_set_hook are expanded from them. The header's
// enums are the ABI, written by hand: tests/python/test_native_tables.py
// fails when one of its enumerators or fields is missing here or differs.
// Each name is its enumerator's suffix in lower case (checked at compile time).
#pragma once

// STATUS(ID, name, text): RESILIENT_RESTART_<ID>; text: status_name's.
#define RESILIENT_RESTART_STATUSES(STATUS)                    \
  STATUS(OK, "ok", "ok")                                      \
  STATUS(SHOULD_RESTART, "should_restart", "should restart")  \
  STATUS(ABORTED, "aborted", "restart aborted")               \
  STATUS(DISCARDED, "discarded", "rank discarded")            \
  STATUS(HEALTH_CHECK, "health_check", "health check failed") \
  STATUS(TIMEOUT, "timeout", "timeout")                       \
  STATUS(CONFIG, "config", "configuration error")             \
  STATUS(COMMUNICATOR, "communicator", "communicator error")  \
  STATUS(ERROR, "error", "error")                             \
  STATUS(STORE_UNAVAILABLE, "store_unavailable", "store unavailable") \
  STATUS(NEEDS_NEW_PROCESS, "needs_new_process", "rank needs a new process")

// MODE(ID, name): RESILIENT_RESTART_MODE_<ID>.
#define RESILIENT_RESTART_MODES(MODE) \
  MODE(ACTIVE, "active")              \
  MODE(INACTIVE, "inactive")          \
  MODE(TERMINATED, "terminated")      \
  MODE(INITIALIZED, "initialized")

// HOOK(ID, name, member): RESILIENT_RESTART_HOOK_<ID>, the Options field it sets.
#define RESILIENT_RESTART_HOOKS(HOOK)             \
  HOOK(INITIALIZE, "initialize", initialize)      \
  HOOK(ABORT, "abort", abort)                     \
  HOOK(FINALIZE, "finalize", finalize)            \
  HOOK(HEALTH_CHECK, "health_check", healthCheck) \
  HOOK(COMPLETION, "completion", completion)      \
  HOOK(TERMINATE, "terminate", terminate)         \
  HOOK(INTERRUPT, "interrupt", interrupt)

// OPTION_TYPE(ID, name): RESILIENT_RESTART_OPTION_<ID>.
#define RESILIENT_RESTART_OPTION_TYPES(OPTION_TYPE) \
  OPTION_TYPE(INT, "int")                           \
  OPTION_TYPE(STRING, "string")

// LAYER_FLAG(ID, name): RESILIENT_RESTART_LAYER_<ID>.
#define RESILIENT_RESTART_LAYER_FLAGS(LAYER_FLAG) \
  LAYER_FLAG(RESERVE, "reserve")                  \
  LAYER_FLAG(BACKFILL, "backfill")

// FIELD(name): a field of resilient_restart_state, in order.
// clang-format off
#define RESILIENT_RESTART_STATE_FIELDS(FIELD) \
  FIELD(initial_rank)                         \
  FIELD(initial_world_size)                   \
  FIELD(rank)                                 \
  FIELD(world_size)                           \
  FIELD(active_rank)                          \
  FIELD(active_world_size)                    \
  FIELD(iteration)                            \
  FIELD(mode)                                 \
  FIELD(fn_failed)                            \
  FIELD(culprit)
// clang-format on

// FIELD(name): a field of resilient_restart_slot, in order.
#define RESILIENT_RESTART_SLOT_FIELDS(FIELD) FIELD(rank) FIELD(mode) FIELD(active_rank)

// FIELD(name): a field of resilient_restart_layer, in order.
#define RESILIENT_RESTART_LAYER_FIELDS(FIELD) FIELD(min_ranks) FIELD(max_ranks) FIELD(flags)

#include <cstddef>

namespace resilient::restart::capi {

// The C API's iteration over one of its tables: `previous` NULL gives the
// first row, then each the next; NULL after the last (or for a pointer that
// is not a row).
template <class T, size_t N>
const T* nextRow(const T (&table)[N], const T* previous) noexcept {
  if (previous == nullptr) {
    return table;
  }
  if (previous < table || previous + 1 >= table + N) {
    return nullptr;
  }
  return previous + 1;
}

}  // namespace resilient::restart::capi
