/*
 * The restart library's C API (libresilient-restart.so), for programs and
 * languages that cannot use the C++ API (resilient/restart.hpp). It wraps the
 * same loop: a function registered with resilient_restart_run() is called
 * again on every restart.
 *
 *   resilient_restart_options* o = resilient_restart_options_from_environment();
 *   resilient_restart_options_set_int(o, "max_active_world_size", 6);
 *   resilient_restart_options_add_host_communicator(o, "dp", NULL);
 *   resilient_restart_wrapper* w = resilient_restart_wrapper_create(o);
 *   resilient_restart_options_destroy(o);
 *   int rc = resilient_restart_run(w, train, &my_state);
 *
 * Every function catches what the C++ side throws and reports a status;
 * resilient_restart_last_error() gives the message of the calling thread's
 * last failure. Nothing here throws or aborts the process.
 */
#ifndef RESILIENT_RESTART_H
#define RESILIENT_RESTART_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  RESILIENT_RESTART_OK = 0,
  RESILIENT_RESTART_SHOULD_RESTART = 1, /* a restart is under way: return from the function */
  RESILIENT_RESTART_ABORTED = 2,        /* RestartAbort: the job stopped restarting */
  RESILIENT_RESTART_DISCARDED = 3,      /* this rank left the job (terminated) */
  RESILIENT_RESTART_HEALTH_CHECK = 4,   /* a health check failed on this rank */
  RESILIENT_RESTART_TIMEOUT = 5,
  RESILIENT_RESTART_CONFIG = 6,         /* bad option name, value or ordering */
  RESILIENT_RESTART_COMMUNICATOR = 7,   /* a communicator operation failed */
  RESILIENT_RESTART_ERROR = 8,          /* any other failure (see last_error) */
} resilient_restart_status;

typedef enum {
  RESILIENT_RESTART_MODE_ACTIVE = 0,
  RESILIENT_RESTART_MODE_INACTIVE = 1,
  RESILIENT_RESTART_MODE_TERMINATED = 2,
  RESILIENT_RESTART_MODE_INITIALIZED = 3,
} resilient_restart_mode;

typedef struct {
  int initial_rank;
  int initial_world_size;
  int rank;
  int world_size;
  int active_rank;
  int active_world_size;
  int iteration;
  int mode;        /* resilient_restart_mode */
  int fn_failed;   /* the previous call of the function failed on this rank */
  int culprit;     /* the previous iteration's faults named this rank */
} resilient_restart_state;

typedef struct resilient_restart_options resilient_restart_options;
typedef struct resilient_restart_wrapper resilient_restart_wrapper;
typedef struct resilient_restart_context resilient_restart_context;

/* The message of the calling thread's last failed call ("" if none). */
const char* resilient_restart_last_error(void);
const char* resilient_restart_status_name(int status);

/* Options: the defaults with the NCCL_RESILIENT_RESTART_* knobs applied. */
resilient_restart_options* resilient_restart_options_from_environment(void);
void resilient_restart_options_destroy(resilient_restart_options* options);
/* Integer options: "rank", "world_size", "max_active_world_size",
 * "active_world_size_divisible_by", "max_iterations" (retry controller),
 * "min_world_size", "min_active_world_size", "enabled", "use_monitor_process",
 * "terminate_culprits", "host_store", and every duration in milliseconds by
 * its Options name in snake case with "_ms": "soft_timeout_ms",
 * "hard_timeout_ms", "barrier_timeout_ms", "completion_timeout_ms",
 * "heartbeat_interval_ms", "heartbeat_timeout_ms", "last_call_wait_ms",
 * "monitor_thread_interval_ms", "monitor_process_interval_ms",
 * "progress_watchdog_interval_ms", "termination_grace_time_ms",
 * "finalize_timeout_ms", "health_check_timeout_ms", "communicator_timeout_ms". */
int resilient_restart_options_set_int(resilient_restart_options* options, const char* name,
                                      long long value);
/* String options: "store_url", "job_id", "monitor_executable",
 * "monitor_log_file", "monitor_pid_file", "blackbox_dir". */
int resilient_restart_options_set_string(resilient_restart_options* options, const char* name,
                                         const char* value);

/* A hook returns 0 when it succeeded; anything else is a failure of this rank
 * (for initialize: RESILIENT_RESTART_ABORTED stops restarting). */
typedef int (*resilient_restart_hook)(const resilient_restart_state* state, void* user);
typedef enum {
  RESILIENT_RESTART_HOOK_INITIALIZE = 0,
  RESILIENT_RESTART_HOOK_ABORT = 1,
  RESILIENT_RESTART_HOOK_FINALIZE = 2,
  RESILIENT_RESTART_HOOK_HEALTH_CHECK = 3,
  RESILIENT_RESTART_HOOK_COMPLETION = 4,
  RESILIENT_RESTART_HOOK_TERMINATE = 5,
} resilient_restart_hook_kind;
int resilient_restart_options_set_hook(resilient_restart_options* options, int kind,
                                       resilient_restart_hook hook, void* user);
/* A host-engine communicator named `name` for every iteration, through the
 * net plugin `plugin` (NULL: libnccl-net-resilient.so). */
int resilient_restart_options_add_host_communicator(resilient_restart_options* options,
                                                    const char* name, const char* plugin);

/* The wrapper (validates the options; NULL on failure, see last_error). */
resilient_restart_wrapper* resilient_restart_wrapper_create(const resilient_restart_options* options);
void resilient_restart_wrapper_destroy(resilient_restart_wrapper* wrapper);

/* The wrapped function: return 0 when done; RESILIENT_RESTART_SHOULD_RESTART
 * as soon as a call of this API returned it; any other value is a failure of
 * this rank (every rank restarts). */
typedef int (*resilient_restart_function)(resilient_restart_context* context, void* user);
/* Runs `fn` until one call completed on every active rank. Returns
 * RESILIENT_RESTART_OK, or the terminal status of this rank. */
int resilient_restart_run(resilient_restart_wrapper* wrapper, resilient_restart_function fn,
                          void* user);
/* The state of the last iteration. */
int resilient_restart_wrapper_state(const resilient_restart_wrapper* wrapper,
                                    resilient_restart_state* state);

/* The wrapper's timeline (what the loop did on this rank and when) as JSON,
 * the array of resilient::restart::timelineJson(). Sets *length to the text's
 * length without its NUL and copies as much as fits into `buffer` of `size`
 * bytes, NUL-terminated (call with size 0 to learn the length). */
int resilient_restart_timeline_json(const resilient_restart_wrapper* wrapper, char* buffer,
                                    size_t size, size_t* length);

/* Inside the wrapped function. */
int resilient_restart_context_state(const resilient_restart_context* context,
                                    resilient_restart_state* state);
void resilient_restart_ping(resilient_restart_context* context);
/* 1 once a restart has begun (return RESILIENT_RESTART_SHOULD_RESTART then). */
int resilient_restart_cancelled(const resilient_restart_context* context);
/* A section the abort never interrupts (nesting allowed). */
void resilient_restart_atomic_begin(resilient_restart_context* context);
void resilient_restart_atomic_end(resilient_restart_context* context);
/* While off, soft and hard timeouts do not apply to this rank (nesting counts). */
void resilient_restart_hang_protection_off(resilient_restart_context* context);
void resilient_restart_hang_protection_on(resilient_restart_context* context);
/* Operations of the host communicator `name` (NULL: the only one). */
int resilient_restart_allreduce_sum_f32(resilient_restart_context* context, const char* name,
                                        const float* in, float* out, size_t count);
int resilient_restart_broadcast(resilient_restart_context* context, const char* name, void* data,
                                size_t bytes, int root);
int resilient_restart_barrier(resilient_restart_context* context, const char* name);

#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_RESTART_H */
