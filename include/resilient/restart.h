/*
 * The restart library's C API (libresilient-restart.so), for programs and
 * languages that cannot use the C++ API (resilient/restart.hpp). It wraps the
 * same loop: a function registered with resilient_restart_run() is called
 * again on every restart.
 *
 *   resilient_restart_options* o = resilient_restart_options_from_environment();
 *   resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_MAX_ACTIVE_WORLD_SIZE, 6);
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

#include "resilient/restart/visibility.h"

#ifdef __cplusplus
extern "C" {
#endif
RESILIENT_RESTART_API_BEGIN

typedef enum {
  RESILIENT_RESTART_OK = 0,
  RESILIENT_RESTART_SHOULD_RESTART = 1, /* a restart is under way: return from the function */
  RESILIENT_RESTART_ABORTED = 2,        /* RestartAbort: the job stopped restarting */
  RESILIENT_RESTART_DISCARDED = 3,      /* this rank left the job (terminated) */
  RESILIENT_RESTART_HEALTH_CHECK = 4,   /* a health check failed on this rank */
  RESILIENT_RESTART_TIMEOUT = 5,
  RESILIENT_RESTART_CONFIG = 6,            /* bad option name, value or ordering */
  RESILIENT_RESTART_COMMUNICATOR = 7,      /* a communicator operation failed */
  RESILIENT_RESTART_ERROR = 8,             /* any other failure (see last_error) */
  RESILIENT_RESTART_STORE_UNAVAILABLE = 9, /* the store did not answer within an operation's
                                              bound (a TIMEOUT; the rank left the loop) */
  RESILIENT_RESTART_NEEDS_NEW_PROCESS = 10, /* a HEALTH_CHECK: only a new process can use the
                                               GPU again (a sticky CUDA error); a health
                                               hook returns it to ask for one */
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
  int mode;      /* resilient_restart_mode */
  int fn_failed; /* the previous call of the function failed on this rank */
  int culprit;   /* the previous iteration's faults named this rank */
} resilient_restart_state;

typedef struct resilient_restart_options resilient_restart_options;
typedef struct resilient_restart_wrapper resilient_restart_wrapper;
typedef struct resilient_restart_context resilient_restart_context;

/* Inside the wrapped function: watch an NCCL communicator this program made
 * (or torch's): the library polls its ncclCommGetAsyncError, so an error
 * NCCL or the net plugin finds on it starts the restart at once; a restart
 * revokes it (NCCL >= 2.28.7), the library never frees it. `library`: the
 * libnccl that made it (NULL: "libnccl.so.2"). For this iteration only. */
int resilient_restart_context_watch_nccl_comm(resilient_restart_context* context, void* comm,
                                              const char* library);

/* A callback of the library (the wrapped function, a hook, a policy) about
 * to return a failure gives its message here, from the thread it runs on:
 * the library reports that text instead of "the C hook returned N". */
void resilient_restart_set_callback_error(const char* message);

/* The version of the library loaded ("0.1.0"; resilient/version.h has the
 * headers' RESILIENT_VERSION_STRING). */
const char* resilient_restart_version(void);
/* The message of the calling thread's last failed call ("" if none). */
const char* resilient_restart_last_error(void);
const char* resilient_restart_status_name(int status);

/* This header's constants as the library knows them, for bindings that read
 * them at run time instead of copying them (the Python package): group
 * "status", "mode", "hook", "option_type", "layer_flag" (each enumerator,
 * named by its suffix in lower case: "should_restart"), "state", "slot" and
 * "layer" (each field of resilient_restart_state / _slot / _layer, value its
 * byte offset), "size" ("state", "slot", "layer", "option_info": sizeof). */
typedef struct {
  const char* group;
  const char* name;
  int value;
} resilient_restart_constant;
/* Every constant in turn: NULL gives the first, then each the next; NULL after the last. */
const resilient_restart_constant* resilient_restart_constant_next(
    const resilient_restart_constant* previous);

/* Options: the defaults with the NCCL_RESILIENT_RESTART_* knobs applied. */
resilient_restart_options* resilient_restart_options_from_environment(void);
void resilient_restart_options_destroy(resilient_restart_options* options);
/* Options are named by typed ids (a misspelt id does not compile), libcurl
 * style; each also has a name, its Options field in snake case (durations
 * end in "_ms"), which resilient_restart_option_by_name finds at run time. */
typedef enum {
  RESILIENT_RESTART_OPTION_INT = 0,    /* resilient_restart_options_set_int */
  RESILIENT_RESTART_OPTION_STRING = 1, /* resilient_restart_options_set_string */
} resilient_restart_option_type;

typedef enum {
  /* integers */
  RESILIENT_RESTART_OPT_RANK = 1,
  RESILIENT_RESTART_OPT_WORLD_SIZE = 2,
  RESILIENT_RESTART_OPT_MAX_ACTIVE_WORLD_SIZE = 3,
  RESILIENT_RESTART_OPT_ACTIVE_WORLD_SIZE_DIVISIBLE_BY = 4,
  RESILIENT_RESTART_OPT_MAX_ITERATIONS = 5, /* the retry controller */
  RESILIENT_RESTART_OPT_MIN_WORLD_SIZE = 6,
  RESILIENT_RESTART_OPT_MIN_ACTIVE_WORLD_SIZE = 7,
  RESILIENT_RESTART_OPT_ENABLED = 8, /* booleans: 0 or not 0 */
  RESILIENT_RESTART_OPT_USE_MONITOR_PROCESS = 9,
  RESILIENT_RESTART_OPT_TERMINATE_CULPRITS = 10,
  RESILIENT_RESTART_OPT_HOST_STORE = 11,
  RESILIENT_RESTART_OPT_STORM_LIMIT = 12, /* restarts within the storm window (0: no limit) */
  RESILIENT_RESTART_OPT_AUTOMATIC_HEALTH_CHECKS = 13, /* the stock checks at every restart */
  /* durations, in milliseconds (integers) */
  RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS = 20,
  RESILIENT_RESTART_OPT_HARD_TIMEOUT_MS = 21,
  RESILIENT_RESTART_OPT_BARRIER_TIMEOUT_MS = 22,
  RESILIENT_RESTART_OPT_COMPLETION_TIMEOUT_MS = 23,
  RESILIENT_RESTART_OPT_HEARTBEAT_INTERVAL_MS = 24,
  RESILIENT_RESTART_OPT_HEARTBEAT_TIMEOUT_MS = 25,
  /* 26: was LAST_CALL_WAIT_MS, removed: the culprits are named by causality
     (a fault detected before the named rank began its abort), without a window */
  RESILIENT_RESTART_OPT_MONITOR_THREAD_INTERVAL_MS = 27,
  RESILIENT_RESTART_OPT_MONITOR_PROCESS_INTERVAL_MS = 28,
  RESILIENT_RESTART_OPT_PROGRESS_WATCHDOG_INTERVAL_MS = 29,
  RESILIENT_RESTART_OPT_TERMINATION_GRACE_TIME_MS = 30,
  RESILIENT_RESTART_OPT_FINALIZE_TIMEOUT_MS = 31,
  RESILIENT_RESTART_OPT_HEALTH_CHECK_TIMEOUT_MS = 32,
  RESILIENT_RESTART_OPT_COMMUNICATOR_TIMEOUT_MS = 33,
  RESILIENT_RESTART_OPT_STORM_WINDOW_MS = 34,
  RESILIENT_RESTART_OPT_RESTART_BACKOFF_MS = 35,
  RESILIENT_RESTART_OPT_RESTART_BACKOFF_MAX_MS = 36,
  /* strings */
  RESILIENT_RESTART_OPT_STORE_URL = 40,
  RESILIENT_RESTART_OPT_JOB_ID = 41,
  RESILIENT_RESTART_OPT_MONITOR_EXECUTABLE = 42,
  RESILIENT_RESTART_OPT_MONITOR_LOG_FILE = 43,
  RESILIENT_RESTART_OPT_MONITOR_PID_FILE = 44,
  RESILIENT_RESTART_OPT_BLACKBOX_DIR = 45,
  /* the job's health comparison (docs/observability.md): integers, durations
     in milliseconds, booleans (restart: the finding is also a fault) */
  RESILIENT_RESTART_OPT_HEALTH_INTERVAL_MS = 50, /* 0: no comparison */
  RESILIENT_RESTART_OPT_SLOW_LINK_PERCENT = 51,
  RESILIENT_RESTART_OPT_SLOW_LINK_WINDOW_MS = 52,
  RESILIENT_RESTART_OPT_SLOW_LINK_RESTART = 53,
  RESILIENT_RESTART_OPT_STRAGGLER_LAG_MS = 54,
  RESILIENT_RESTART_OPT_STRAGGLER_WINDOW_MS = 55,
  RESILIENT_RESTART_OPT_STRAGGLER_RESTART = 56,
  RESILIENT_RESTART_OPT_STUCK_RANK_TIMEOUT_MS = 57,
  RESILIENT_RESTART_OPT_STUCK_RANK_RESTART = 58,
} resilient_restart_option_id;

typedef struct {
  const char* name; /* "soft_timeout_ms" */
  int id;           /* resilient_restart_option_id */
  int type;         /* resilient_restart_option_type */
} resilient_restart_option_info;

/* The option named `name`, or NULL. */
const resilient_restart_option_info* resilient_restart_option_by_name(const char* name);
/* The option with id `id`, or NULL. */
const resilient_restart_option_info* resilient_restart_option_by_id(int id);
/* Every option in turn: NULL gives the first, then each the next; NULL after the last. */
const resilient_restart_option_info* resilient_restart_option_next(
    const resilient_restart_option_info* previous);

/* The NCCL_RESILIENT_* variable an option's default comes from, or NULL (the
 * default is the C++ Options'): docs/configuration.md. */
const char* resilient_restart_option_knob(int id);

/* RESILIENT_RESTART_CONFIG for an unknown id, an option of the other type or
 * a value out of range (integers: -1 to 2^30). */
int resilient_restart_options_set_int(resilient_restart_options* options, int option,
                                      long long value);
int resilient_restart_options_set_string(resilient_restart_options* options, int option,
                                         const char* value);
/* An option's value (durations in milliseconds, booleans 0 or 1, -1 for
 * max_active_world_size ... min_active_world_size when not set). A string is
 * copied as resilient_restart_timeline_json copies its text.
 * RESILIENT_RESTART_CONFIG for an unknown id or an option of the other type. */
int resilient_restart_options_get_int(const resilient_restart_options* options, int option,
                                      long long* value);
int resilient_restart_options_get_string(const resilient_restart_options* options, int option,
                                         char* buffer, size_t size, size_t* length);

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
  /* On the library's monitor thread the moment a restart begins, before any
   * communicator is aborted: stop the wrapped function (a collective the
   * abort cuts short completes with partial sums that must not be used).
   * resilient_restart_cancelled() is true from then on. */
  RESILIENT_RESTART_HOOK_INTERRUPT = 6,
} resilient_restart_hook_kind;
int resilient_restart_options_set_hook(resilient_restart_options* options, int kind,
                                       resilient_restart_hook hook, void* user);
/* A host-engine communicator named `name` for every iteration, through the
 * net plugin `plugin` (NULL: libnccl-net-resilient.so). */
int resilient_restart_options_add_host_communicator(resilient_restart_options* options,
                                                    const char* name, const char* plugin);

/* Rank assignment (the C++ rank_assignment.hpp): a list of policies, the
 * last one applied first (the reference's Compose). A stock policy by name:
 * "shift_ranks", "fill_gaps", "activate_all_ranks" (argument ignored),
 * "max_active_world_size", "active_world_size_divisible_by" (argument > 0).
 * A callback policy edits the World's slots in place, one per initial rank
 * (rank -1 and mode TERMINATED once terminated): it may change modes (make
 * spares, activate, terminate) and ranks; the active ranks are renumbered
 * after the last policy, and an inconsistent World is an error. `terminated`
 * lists the initial ranks terminated since the previous iteration. Return 0,
 * or non-zero for a failure. Policies must be deterministic: every rank runs
 * them on the same inputs. A policy handle may be destroyed once set. */
typedef struct {
  int rank;        /* in the world being assigned; -1 once terminated */
  int mode;        /* resilient_restart_mode */
  int active_rank; /* as before this iteration's policies (read only) */
} resilient_restart_slot;
typedef int (*resilient_restart_policy_fn)(resilient_restart_slot* slots, int initial_world_size,
                                           const int* terminated, int terminated_count,
                                           int first_iteration, void* user);
typedef struct resilient_restart_policy resilient_restart_policy;
resilient_restart_policy* resilient_restart_policy_stock(const char* name, long long argument);
resilient_restart_policy* resilient_restart_policy_callback(const char* description,
                                                            resilient_restart_policy_fn fn,
                                                            void* user);
void resilient_restart_policy_destroy(resilient_restart_policy* policy);
/* Replaces the default (activate_all_ranks then shift_ranks); n = 0 restores
 * it. Cannot be combined with max_active_world_size /
 * active_world_size_divisible_by (put those in the list). */
int resilient_restart_options_set_rank_assignment(resilient_restart_options* options,
                                                  resilient_restart_policy* const* policies,
                                                  size_t n);

/* Topology-aware assignment (the C++ tree.hpp, the reference's Tree): the
 * ranks form a tree of domains, one layer per level; layers[0] is the whole
 * job, each further layer splits its parent's domains by its key. A whole
 * policy: set it alone. `key` gives initial rank `initial_rank`'s domain at
 * `layer` (1 .. n-1; never called for the root): it writes the key's bytes to
 * `buffer` (`size` bytes), sets *length, and returns 0 (non-zero: a
 * failure); when *length > size it is called again with a buffer that fits.
 * Keys are asked once per initial world size, for every initial rank, and
 * kept. `filter` (NULL: none) sets *keep, the active ranks to keep (<=
 * active_count), and returns 0. NULL on bad layers (see last_error). */
typedef enum {
  RESILIENT_RESTART_LAYER_RESERVE = 1,  /* spares of a domain replace its failed ranks */
  RESILIENT_RESTART_LAYER_BACKFILL = 2, /* else the domain's last active rank fills the hole */
} resilient_restart_layer_flag;
typedef struct {
  int min_ranks; /* fewer live ranks: the domain is terminated */
  int max_ranks; /* at most this many active ranks per domain; -1: no limit */
  int flags;     /* resilient_restart_layer_flag, or'ed */
} resilient_restart_layer;
typedef int (*resilient_restart_layer_key_fn)(int layer, int initial_rank, char* buffer,
                                              size_t size, size_t* length, void* user);
typedef int (*resilient_restart_world_size_filter_fn)(int active_count, int* keep, void* user);
resilient_restart_policy* resilient_restart_policy_tree(
    const resilient_restart_layer* layers, size_t n, resilient_restart_layer_key_fn key,
    resilient_restart_world_size_filter_fn filter, void* user);

/* One assignment as the loop makes it, outside a job (tests, tools that
 * simulate one): `slots` (n, one per initial rank) hold the previous World;
 * the initial ranks in `terminated` are marked terminated, the policies run
 * (composed as resilient_restart_options_set_rank_assignment composes them;
 * none: the default), the active ranks are renumbered; `slots` receive the
 * new World. With `first_iteration` the slots are ignored and the job's
 * first World is made (every rank active, rank = initial rank, before the
 * policies). An inconsistent result is RESILIENT_RESTART_ERROR naming what
 * is wrong. */
int resilient_restart_policy_apply(resilient_restart_policy* const* policies, size_t count,
                                   resilient_restart_slot* slots, int n, const int* terminated,
                                   int terminated_count, int first_iteration);

/* The stock health checks (the C++ health.hpp) as objects, to run from a
 * health-check hook: "cuda" (argument: the synchronize timeout in ms, -1:
 * NCCL_RESILIENT_HEALTH_CUDA_TIMEOUT_MS), "gpu_recovery" (argument 1: an
 * NVLink down fails), "nic" (argument: the error-counter threshold, -1: the
 * knob's), "fault_counter" (argument: the most faults of this rank allowed).
 * run returns RESILIENT_RESTART_OK, or RESILIENT_RESTART_HEALTH_CHECK (or
 * _TIMEOUT) with the reason in last_error. A check keeps its state between
 * runs (counter baselines, the fault tally). */
typedef struct resilient_restart_health_check resilient_restart_health_check;
resilient_restart_health_check* resilient_restart_health_check_stock(const char* name,
                                                                     long long argument);
int resilient_restart_health_check_run(resilient_restart_health_check* check,
                                       const resilient_restart_state* state);
void resilient_restart_health_check_destroy(resilient_restart_health_check* check);
/* The stock initialize hook (the C++ retryController, the reference's
 * RetryController) as such an object, run and destroyed as a check: run
 * returns RESILIENT_RESTART_ABORTED, the reason in last_error, once the
 * state's iteration reaches max_iterations (-1: no limit) or its world size
 * (active world size) is below min_world_size (min_active_world_size). NULL
 * on limits out of range. */
resilient_restart_health_check* resilient_restart_retry_controller(long long max_iterations,
                                                                   int min_world_size,
                                                                   int min_active_world_size);

/* The wrapper (validates the options; NULL on failure, see last_error). */
resilient_restart_wrapper* resilient_restart_wrapper_create(
    const resilient_restart_options* options);
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
/* The rank enters (later leaves) the next collective of `group`, whose rank
 * `rank` of `nranks` it is, where no NCCL profiler sees it (a torch group over
 * gloo): stragglers and stuck ranks are found there too. 0, or an error
 * status for a NULL or empty argument or rank outside [0, nranks). */
int resilient_restart_collective_enter(resilient_restart_context* context, const char* group,
                                       const char* function, int rank, int nranks);
int resilient_restart_collective_leave(resilient_restart_context* context, const char* group);
/* Operations of the host communicator `name` (NULL: the only one). */
int resilient_restart_allreduce_sum_f32(resilient_restart_context* context, const char* name,
                                        const float* in, float* out, size_t count);
int resilient_restart_broadcast(resilient_restart_context* context, const char* name, void* data,
                                size_t bytes, int root);
int resilient_restart_barrier(resilient_restart_context* context, const char* name);

/* A client of the job's store (tcp://, etcd:// or memory, as
 * NCCL_RESILIENT_STORE_URL; the job token from NCCL_RESILIENT_JOB_TOKEN) for
 * programs that coordinate through it themselves. Timeouts in milliseconds;
 * -1: the store's default (`timeout_ms` of open, -1 there:
 * NCCL_RESILIENT_STORE_TIMEOUT_MS). A call that runs out of time returns
 * RESILIENT_RESTART_TIMEOUT. Values are bytes; those returned are
 * malloc'd (NUL-terminated besides their length) and released with
 * resilient_restart_free. One store handle may be used by several threads.
 * A TCP store server restarted on the same address (resilient-run serves
 * the job's store again after it died) is followed, as the library's own
 * clients follow it: its state is lost (a WARN says so), the handle goes on
 * with the new instance; before, every later call failed. */
typedef struct resilient_restart_store resilient_restart_store;
resilient_restart_store* resilient_restart_store_open(const char* url, long long timeout_ms);
void resilient_restart_store_close(resilient_restart_store* store);
void resilient_restart_free(void* memory);
int resilient_restart_store_set(resilient_restart_store* store, const char* key, const void* value,
                                size_t length, long long timeout_ms);
/* Does not wait: *found = 0 when the key is absent. */
int resilient_restart_store_get(resilient_restart_store* store, const char* key, char** value,
                                size_t* length, int* found, long long timeout_ms);
int resilient_restart_store_add(resilient_restart_store* store, const char* key, long long delta,
                                long long* result, long long timeout_ms);
/* If the value equals `expected` (expect_absent != 0: the key is absent),
 * store `desired`; *swapped says whether it did, *current is the value now
 * stored (*current_found = 0: absent). */
int resilient_restart_store_compare_set(resilient_restart_store* store, const char* key,
                                        const void* expected, size_t expected_length,
                                        int expect_absent, const void* desired,
                                        size_t desired_length, int* swapped, char** current,
                                        size_t* current_length, int* current_found,
                                        long long timeout_ms);
/* Until every key exists. */
int resilient_restart_store_wait(resilient_restart_store* store, const char* const* keys, size_t n,
                                 long long timeout_ms);
int resilient_restart_store_check(resilient_restart_store* store, const char* const* keys, size_t n,
                                  int* present, long long timeout_ms);
int resilient_restart_store_delete(resilient_restart_store* store, const char* key, int* existed,
                                   long long timeout_ms);
int resilient_restart_store_delete_prefix(resilient_restart_store* store, const char* prefix,
                                          long long* removed, long long timeout_ms);

RESILIENT_RESTART_API_END
#ifdef __cplusplus
}
#endif

#endif /* RESILIENT_RESTART_H */
