/* The C API, compiled as C and linked to libresilient-restart.so: a
 * one-rank job on an in-process store whose function fails once and then
 * succeeds, hooks called with the right state, bad options refused with a
 * message, the retry limit ending the job, a Tree and the assignment
 * outside a job, the retry controller as an object. Exit status 0 when every
 * check holds; each failed check prints itself. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "resilient/restart.h"
#include "resilient/version.h"

static int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              resilient_restart_last_error());                                                 \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

struct counters {
  int calls;
  int initialize;
  int finalize;
  int completion;
  int terminate;
  int fail_until; /* the function fails while iteration < fail_until */
};

static int on_initialize(const resilient_restart_state* s, void* user) {
  struct counters* c = (struct counters*)user;
  CHECK(s->iteration == c->initialize);
  ++c->initialize;
  return 0;
}

static int on_finalize(const resilient_restart_state* s, void* user) {
  (void)s;
  ++((struct counters*)user)->finalize;
  return 0;
}

static int on_completion(const resilient_restart_state* s, void* user) {
  (void)s;
  ++((struct counters*)user)->completion;
  return 0;
}

static int on_terminate(const resilient_restart_state* s, void* user) {
  (void)s;
  ++((struct counters*)user)->terminate;
  return 0;
}

static int train(resilient_restart_context* ctx, void* user) {
  struct counters* c = (struct counters*)user;
  resilient_restart_state s;
  CHECK(resilient_restart_context_state(ctx, &s) == RESILIENT_RESTART_OK);
  CHECK(s.mode == RESILIENT_RESTART_MODE_ACTIVE);
  CHECK(s.fn_failed == (s.iteration > 0));
  ++c->calls;
  resilient_restart_ping(ctx);
  resilient_restart_atomic_begin(ctx);
  resilient_restart_atomic_end(ctx);
  CHECK(resilient_restart_cancelled(ctx) == 0);
  return s.iteration < c->fail_until ? 42 : 0;
}

/* A callback policy: every live rank active, the highest a spare. */
static int last_rank_spare(resilient_restart_slot* slots, int n, const int* terminated,
                           int terminated_count, int first_iteration, void* user) {
  (void)terminated;
  (void)terminated_count;
  (void)first_iteration;
  ++*(int*)user;
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (slots[i].mode != RESILIENT_RESTART_MODE_TERMINATED) {
      slots[i].mode = RESILIENT_RESTART_MODE_ACTIVE;
      last = i;
    }
  }
  if (last >= 0) {
    slots[last].mode = RESILIENT_RESTART_MODE_INACTIVE;
  }
  return 0;
}

static int failing_policy(resilient_restart_slot* slots, int n, const int* terminated,
                          int terminated_count, int first_iteration, void* user) {
  (void)slots, (void)n, (void)terminated, (void)terminated_count, (void)first_iteration, (void)user;
  resilient_restart_set_callback_error("no layout fits");
  return 1;
}

static int fail_with_text(resilient_restart_context* ctx, void* user) {
  (void)ctx;
  (void)user;
  resilient_restart_set_callback_error("the C function's own words");
  return 8;
}

static resilient_restart_options* one_rank_options(struct counters* c) {
  resilient_restart_options* o = resilient_restart_options_from_environment();
  CHECK(o != NULL);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_RANK, 0) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_WORLD_SIZE, 1) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_USE_MONITOR_PROCESS, 0) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_string(o, RESILIENT_RESTART_OPT_STORE_URL, "memory") ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_string(o, RESILIENT_RESTART_OPT_BLACKBOX_DIR, "") ==
        RESILIENT_RESTART_OK);
  /* 26 was LAST_CALL_WAIT_MS (removed): a program built against it is told. */
  CHECK(resilient_restart_options_set_int(o, (resilient_restart_option_id)26, 0) !=
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_MONITOR_THREAD_INTERVAL_MS,
                                          20) == RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_hook(o, RESILIENT_RESTART_HOOK_INITIALIZE, on_initialize,
                                           c) == RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_hook(o, RESILIENT_RESTART_HOOK_FINALIZE, on_finalize, c) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_hook(o, RESILIENT_RESTART_HOOK_COMPLETION, on_completion,
                                           c) == RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_hook(o, RESILIENT_RESTART_HOOK_TERMINATE, on_terminate, c) ==
        RESILIENT_RESTART_OK);
  return o;
}

/* A function that fails twice, then completes. */
static void test_fails_twice_then_completes(void) {
  struct counters c = {0, 0, 0, 0, 0, 2};
  resilient_restart_options* o = one_rank_options(&c);
  resilient_restart_wrapper* w = resilient_restart_wrapper_create(o);
  resilient_restart_options_destroy(o);
  CHECK(w != NULL);
  if (w != NULL) {
    CHECK(resilient_restart_run(w, train, &c) == RESILIENT_RESTART_OK);
    resilient_restart_state s;
    CHECK(resilient_restart_wrapper_state(w, &s) == RESILIENT_RESTART_OK);
    CHECK(s.iteration == 2);
    CHECK(c.calls == 3);
    CHECK(c.initialize == 3);
    CHECK(c.finalize == 2);
    CHECK(c.completion == 1);
    CHECK(c.terminate == 0);
    /* The timeline as JSON: its length first, then the text, then a
     * buffer too small for it (truncated, still NUL-terminated). */
    size_t length = 0;
    CHECK(resilient_restart_timeline_json(w, NULL, 0, &length) == RESILIENT_RESTART_OK);
    CHECK(length > 2);
    char json[8192];
    size_t again = 0;
    CHECK(length < sizeof json);
    CHECK(resilient_restart_timeline_json(w, json, sizeof json, &again) == RESILIENT_RESTART_OK);
    CHECK(again == length && strlen(json) == length);
    CHECK(json[0] == '[' && json[length - 1] == ']');
    CHECK(strstr(json, "\"phase\":\"function entered\"") != NULL);
    CHECK(strstr(json, "\"iteration\":2") != NULL);
    CHECK(strstr(json, "\"mono_ns\":") != NULL);
    char small[5];
    CHECK(resilient_restart_timeline_json(w, small, sizeof small, &again) == RESILIENT_RESTART_OK);
    CHECK(again == length && strlen(small) == 4 && strncmp(small, json, 4) == 0);
    CHECK(resilient_restart_timeline_json(w, NULL, 4, &again) == RESILIENT_RESTART_CONFIG);
    resilient_restart_wrapper_destroy(w);
  }
}

/* The retry limit ends the job: RestartAbort, the terminate hook runs. */
static void test_retry_limit(void) {
  struct counters c = {0, 0, 0, 0, 0, 1000};
  resilient_restart_options* o = one_rank_options(&c);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_MAX_ITERATIONS, 3) ==
        RESILIENT_RESTART_OK);
  resilient_restart_wrapper* w = resilient_restart_wrapper_create(o);
  resilient_restart_options_destroy(o);
  CHECK(w != NULL);
  if (w != NULL) {
    CHECK(resilient_restart_run(w, train, &c) == RESILIENT_RESTART_ABORTED);
    CHECK(strstr(resilient_restart_last_error(), "iteration") != NULL);
    CHECK(c.calls == 3);
    CHECK(c.terminate == 1);
    resilient_restart_wrapper_destroy(w);
  }
}

/* Bad input: named in the message, nothing thrown across the ABI. */
static void test_bad_input(void) {
  resilient_restart_options* o = resilient_restart_options_from_environment();
  CHECK(resilient_restart_options_set_int(o, 999, 1) == RESILIENT_RESTART_CONFIG);
  CHECK(strstr(resilient_restart_last_error(), "no option has id 999") != NULL);
  CHECK(resilient_restart_options_set_string(o, RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS, "x") ==
        RESILIENT_RESTART_CONFIG);
  CHECK(strstr(resilient_restart_last_error(), "soft_timeout_ms is an integer") != NULL);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_JOB_ID, 1) ==
        RESILIENT_RESTART_CONFIG);
  CHECK(strstr(resilient_restart_last_error(), "job_id is a string") != NULL);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_RANK, 1LL << 40) ==
        RESILIENT_RESTART_CONFIG);
  CHECK(strstr(resilient_restart_last_error(), "rank: 1099511627776 is out of range") != NULL);
  CHECK(resilient_restart_options_set_hook(o, 99, on_finalize, NULL) == RESILIENT_RESTART_CONFIG);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS, 100000) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_wrapper_create(o) == NULL); /* soft >= hard */
  CHECK(strstr(resilient_restart_last_error(), "softTimeout") != NULL);
  CHECK(resilient_restart_run(NULL, train, NULL) == RESILIENT_RESTART_CONFIG);
  CHECK(strcmp(resilient_restart_status_name(RESILIENT_RESTART_DISCARDED), "rank discarded") == 0);
  resilient_restart_options_destroy(o);
}

/* The library's version is the headers'. */
static void test_version(void) {
  CHECK(strcmp(resilient_restart_version(), RESILIENT_VERSION_STRING) == 0);
  CHECK(RESILIENT_VERSION_NUMBER ==
        RESILIENT_VERSION_MAJOR * 10000 + RESILIENT_VERSION_MINOR * 100 + RESILIENT_VERSION_PATCH);
}

/* Options by name (the second path) and in turn: one entry per id. */
static void test_options_by_name(void) {
  const resilient_restart_option_info* info =
      resilient_restart_option_by_name("heartbeat_timeout_ms");
  CHECK(info != NULL && info->id == RESILIENT_RESTART_OPT_HEARTBEAT_TIMEOUT_MS &&
        info->type == RESILIENT_RESTART_OPTION_INT);
  info = resilient_restart_option_by_id(RESILIENT_RESTART_OPT_BLACKBOX_DIR);
  CHECK(info != NULL && strcmp(info->name, "blackbox_dir") == 0 &&
        info->type == RESILIENT_RESTART_OPTION_STRING);
  CHECK(resilient_restart_option_by_name("no_such_option") == NULL);
  CHECK(resilient_restart_option_by_name(NULL) == NULL);
  CHECK(resilient_restart_option_by_id(0) == NULL);
  int count = 0;
  int last_id = 0;
  for (const resilient_restart_option_info* i = resilient_restart_option_next(NULL); i != NULL;
       i = resilient_restart_option_next(i)) {
    CHECK(i->id > last_id); /* in id order, each once */
    CHECK(resilient_restart_option_by_name(i->name) == i);
    last_id = i->id;
    ++count;
  }
  CHECK(count == 44);
  resilient_restart_options* o = resilient_restart_options_from_environment();
  info = resilient_restart_option_by_name("store_url");
  CHECK(info != NULL &&
        resilient_restart_options_set_string(o, info->id, "memory") == RESILIENT_RESTART_OK);
  /* Values read back, typed as they are set; unset policies are -1. */
  char text[8];
  size_t length = 0;
  CHECK(resilient_restart_options_get_string(o, info->id, text, sizeof text, &length) ==
        RESILIENT_RESTART_OK);
  CHECK(length == 6 && strcmp(text, "memory") == 0);
  CHECK(resilient_restart_options_get_string(o, info->id, text, 4, &length) ==
        RESILIENT_RESTART_OK);
  CHECK(length == 6 && strcmp(text, "mem") == 0);
  long long value = 0;
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_STUCK_RANK_TIMEOUT_MS, 2500) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_get_int(o, RESILIENT_RESTART_OPT_STUCK_RANK_TIMEOUT_MS, &value) ==
            RESILIENT_RESTART_OK &&
        value == 2500);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_SLOW_LINK_RESTART, 7) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_get_int(o, RESILIENT_RESTART_OPT_SLOW_LINK_RESTART, &value) ==
            RESILIENT_RESTART_OK &&
        value == 1);
  CHECK(resilient_restart_options_get_int(o, RESILIENT_RESTART_OPT_MAX_ITERATIONS, &value) ==
            RESILIENT_RESTART_OK &&
        value == -1);
  CHECK(resilient_restart_options_get_int(o, RESILIENT_RESTART_OPT_JOB_ID, &value) ==
        RESILIENT_RESTART_CONFIG);
  CHECK(resilient_restart_options_get_string(o, RESILIENT_RESTART_OPT_RANK, text, sizeof text,
                                             &length) == RESILIENT_RESTART_CONFIG);
  CHECK(resilient_restart_options_get_int(o, 0, &value) == RESILIENT_RESTART_CONFIG);
  resilient_restart_options_destroy(o);
  /* Where each default comes from. */
  CHECK(strcmp(resilient_restart_option_knob(RESILIENT_RESTART_OPT_SOFT_TIMEOUT_MS),
               "NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS") == 0);
  CHECK(resilient_restart_option_knob(RESILIENT_RESTART_OPT_RANK) == NULL);
  CHECK(resilient_restart_option_knob(0) == NULL);
}

/* The header's constants as the library knows them. */
static void test_constants(void) {
  int statuses = 0;
  int state_fields = 0;
  for (const resilient_restart_constant* c = resilient_restart_constant_next(NULL); c != NULL;
       c = resilient_restart_constant_next(c)) {
    if (strcmp(c->group, "status") == 0) {
      ++statuses;
    } else if (strcmp(c->group, "state") == 0) {
      ++state_fields;
    }
    if (strcmp(c->group, "status") == 0 && strcmp(c->name, "store_unavailable") == 0) {
      CHECK(c->value == RESILIENT_RESTART_STORE_UNAVAILABLE);
    }
    if (strcmp(c->group, "status") == 0 && strcmp(c->name, "needs_new_process") == 0) {
      CHECK(c->value == RESILIENT_RESTART_NEEDS_NEW_PROCESS);
    }
    if (strcmp(c->group, "state") == 0 && strcmp(c->name, "culprit") == 0) {
      CHECK(c->value == (int)offsetof(resilient_restart_state, culprit));
    }
    if (strcmp(c->group, "size") == 0 && strcmp(c->name, "state") == 0) {
      CHECK(c->value == (int)sizeof(resilient_restart_state));
    }
  }
  CHECK(statuses == 11 && state_fields == 10);
}

/* The store client, on an in-process store. */
static void test_store_client(void) {
  resilient_restart_store* st = resilient_restart_store_open("memory", 1000);
  CHECK(st != NULL);
  CHECK(resilient_restart_store_open("bogus://x", 1000) == NULL);
  CHECK(strstr(resilient_restart_last_error(), "bogus") != NULL);
  if (st != NULL) {
    CHECK(resilient_restart_store_set(st, "k", "v\0w", 3, -1) == RESILIENT_RESTART_OK);
    char* value = NULL;
    size_t length = 0;
    int found = 0;
    CHECK(resilient_restart_store_get(st, "k", &value, &length, &found, -1) ==
          RESILIENT_RESTART_OK);
    CHECK(found == 1 && length == 3 && memcmp(value, "v\0w", 3) == 0);
    resilient_restart_free(value);
    CHECK(resilient_restart_store_get(st, "none", &value, &length, &found, -1) ==
          RESILIENT_RESTART_OK);
    CHECK(found == 0 && value == NULL);
    long long n = 0;
    CHECK(resilient_restart_store_add(st, "n", 7, &n, -1) == RESILIENT_RESTART_OK && n == 7);
    int swapped = 0;
    CHECK(resilient_restart_store_compare_set(st, "c", NULL, 0, 1, "a", 1, &swapped, &value,
                                              &length, &found, -1) == RESILIENT_RESTART_OK);
    CHECK(swapped == 1 && found == 1 && length == 1 && value[0] == 'a');
    resilient_restart_free(value);
    CHECK(resilient_restart_store_compare_set(st, "c", "x", 1, 0, "b", 1, &swapped, &value, &length,
                                              &found, -1) == RESILIENT_RESTART_OK);
    CHECK(swapped == 0 && found == 1 && value[0] == 'a');
    resilient_restart_free(value);
    const char* keys[] = {"k", "missing"};
    int present = 1;
    CHECK(resilient_restart_store_check(st, keys, 2, &present, -1) == RESILIENT_RESTART_OK);
    CHECK(present == 0);
    CHECK(resilient_restart_store_wait(st, keys, 2, 50) == RESILIENT_RESTART_TIMEOUT);
    CHECK(resilient_restart_store_wait(st, keys, 1, 50) == RESILIENT_RESTART_OK);
    int existed = 0;
    CHECK(resilient_restart_store_delete(st, "k", &existed, -1) == RESILIENT_RESTART_OK);
    CHECK(existed == 1);
    long long removed = 0;
    CHECK(resilient_restart_store_delete_prefix(st, "", &removed, -1) == RESILIENT_RESTART_OK);
    CHECK(removed == 2);
    resilient_restart_store_close(st);
  }
}

/* Rank assignment: stock policies by name, a callback, failures named. */
static void test_rank_assignment(void) {
  CHECK(resilient_restart_policy_stock("no_such_policy", 0) == NULL);
  CHECK(strstr(resilient_restart_last_error(), "shift_ranks") != NULL);
  CHECK(resilient_restart_policy_stock("max_active_world_size", 0) == NULL);
  int calls = 0;
  resilient_restart_policy* p[2] = {
      resilient_restart_policy_callback("LastRankSpare", last_rank_spare, &calls),
      resilient_restart_policy_stock("shift_ranks", 0)};
  CHECK(p[0] != NULL && p[1] != NULL);
  struct counters c = {0, 0, 0, 0, 0, 0};
  resilient_restart_options* o = one_rank_options(&c);
  CHECK(resilient_restart_options_set_rank_assignment(o, p, 2) == RESILIENT_RESTART_OK);
  resilient_restart_policy_destroy(p[0]);
  resilient_restart_policy_destroy(p[1]);
  resilient_restart_wrapper* w = resilient_restart_wrapper_create(o);
  resilient_restart_options_destroy(o);
  CHECK(w != NULL);
  if (w != NULL) {
    /* The only rank made a spare by the policy: the function never runs. */
    (void)resilient_restart_run(w, train, &c);
    CHECK(calls >= 1);
    CHECK(c.calls == 0);
    resilient_restart_wrapper_destroy(w);
  }
  resilient_restart_policy* bad = resilient_restart_policy_callback("Bad", failing_policy, NULL);
  o = one_rank_options(&c);
  CHECK(resilient_restart_options_set_rank_assignment(o, &bad, 1) == RESILIENT_RESTART_OK);
  resilient_restart_policy_destroy(bad);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_MAX_ACTIVE_WORLD_SIZE, 1) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_wrapper_create(o) == NULL); /* both ways of assigning ranks */
  CHECK(strstr(resilient_restart_last_error(), "set_rank_assignment") != NULL);
  resilient_restart_options_destroy(o);
  o = one_rank_options(&c);
  bad = resilient_restart_policy_callback("Bad", failing_policy, NULL);
  CHECK(resilient_restart_options_set_rank_assignment(o, &bad, 1) == RESILIENT_RESTART_OK);
  resilient_restart_policy_destroy(bad);
  w = resilient_restart_wrapper_create(o);
  resilient_restart_options_destroy(o);
  if (w != NULL) {
    CHECK(resilient_restart_run(w, train, &c) != RESILIENT_RESTART_OK);
    CHECK(strstr(resilient_restart_last_error(), "Bad failed: no layout fits") != NULL);
    resilient_restart_wrapper_destroy(w);
  }
}

/* A callback policy that terminates initial rank 1 (e.g. its group failed a count). */
static int drop_rank_one(resilient_restart_slot* slots, int n, const int* terminated,
                         int terminated_count, int first_iteration, void* user) {
  (void)n, (void)terminated, (void)terminated_count, (void)first_iteration, (void)user;
  slots[1].mode = RESILIENT_RESTART_MODE_TERMINATED;
  return 0;
}

/* Two hosts of two ranks (initial rank / 2), the host layer RESERVE. */
static int host_key(int layer, int initial_rank, char* buffer, size_t size, size_t* length,
                    void* user) {
  (void)layer;
  ++*(int*)user;
  char text[32];
  const int n = snprintf(text, sizeof text, "a-long-host-name-%d", initial_rank / 2);
  *length = (size_t)n;
  if ((size_t)n <= size) {
    memcpy(buffer, text, (size_t)n);
  }
  return 0;
}

static int keep_one(int active_count, int* keep, void* user) {
  (void)user;
  *keep = active_count > 0 ? 1 : 0;
  return 0;
}

/* Tree, policy_apply and the retry controller, without a job. */
static void test_tree_apply_and_retry_controller(void) {
  int key_calls = 0;
  resilient_restart_layer layers[2] = {{1, -1, RESILIENT_RESTART_LAYER_RESERVE},
                                       {1, 1, RESILIENT_RESTART_LAYER_RESERVE}};
  resilient_restart_policy* tree =
      resilient_restart_policy_tree(layers, 2, host_key, NULL, &key_calls);
  CHECK(tree != NULL);
  resilient_restart_slot w[4];
  CHECK(resilient_restart_policy_apply(&tree, 1, w, 4, NULL, 0, 1) == RESILIENT_RESTART_OK);
  CHECK(key_calls == 4); /* once per initial rank; the buffer grew for none (18 bytes) */
  /* Depth-first: initial 0 and 2 active (ranks 0, 1), 1 and 3 spares. */
  CHECK(w[0].mode == RESILIENT_RESTART_MODE_ACTIVE && w[0].rank == 0);
  CHECK(w[2].mode == RESILIENT_RESTART_MODE_ACTIVE && w[2].rank == 1);
  CHECK(w[1].mode == RESILIENT_RESTART_MODE_INACTIVE &&
        w[3].mode == RESILIENT_RESTART_MODE_INACTIVE);
  const int dead[1] = {2};
  CHECK(resilient_restart_policy_apply(&tree, 1, w, 4, dead, 1, 0) == RESILIENT_RESTART_OK);
  CHECK(key_calls == 4); /* the layout is kept */
  /* Initial 3, host 1's spare, takes rank 1. */
  CHECK(w[3].mode == RESILIENT_RESTART_MODE_ACTIVE && w[3].rank == 1 && w[3].active_rank == 1);
  CHECK(w[2].mode == RESILIENT_RESTART_MODE_TERMINATED && w[2].rank == -1);
  CHECK(w[1].mode == RESILIENT_RESTART_MODE_INACTIVE);
  resilient_restart_policy_destroy(tree);

  layers[1].flags = 4;
  CHECK(resilient_restart_policy_tree(layers, 2, host_key, NULL, &key_calls) == NULL);
  CHECK(strstr(resilient_restart_last_error(), "unknown flags") != NULL);
  CHECK(resilient_restart_policy_tree(layers, 2, NULL, NULL, NULL) == NULL);
  layers[1].flags = 0;
  tree = resilient_restart_policy_tree(layers, 1, NULL, keep_one, NULL); /* the root alone */
  CHECK(tree != NULL);
  CHECK(resilient_restart_policy_apply(&tree, 1, w, 4, NULL, 0, 1) == RESILIENT_RESTART_OK);
  CHECK(w[0].mode == RESILIENT_RESTART_MODE_ACTIVE && w[1].mode == RESILIENT_RESTART_MODE_INACTIVE);
  resilient_restart_policy_destroy(tree);

  /* No policy: the default (every live rank active, shifted). */
  CHECK(resilient_restart_policy_apply(NULL, 0, w, 4, NULL, 0, 1) == RESILIENT_RESTART_OK);
  const int gone[1] = {0};
  CHECK(resilient_restart_policy_apply(NULL, 0, w, 4, gone, 1, 0) == RESILIENT_RESTART_OK);
  CHECK(w[1].rank == 0 && w[3].rank == 2 && w[3].active_rank == 2);
  w[1].rank = 5; /* an inconsistent previous World is refused */
  CHECK(resilient_restart_policy_apply(NULL, 0, w, 4, NULL, 0, 0) == RESILIENT_RESTART_CONFIG);

  /* A callback that terminates an active rank: shift_ranks (run after it) closes the hole. */
  resilient_restart_policy* drop[2] = {
      resilient_restart_policy_stock("shift_ranks", 0),
      resilient_restart_policy_callback("Drop", drop_rank_one, NULL)};
  CHECK(resilient_restart_policy_apply(drop, 2, w, 4, NULL, 0, 1) == RESILIENT_RESTART_OK);
  CHECK(w[1].mode == RESILIENT_RESTART_MODE_TERMINATED && w[1].active_rank == -1);
  CHECK(w[2].rank == 1 && w[2].active_rank == 1 && w[3].rank == 2);
  resilient_restart_policy_destroy(drop[0]);
  resilient_restart_policy_destroy(drop[1]);

  resilient_restart_health_check* retry = resilient_restart_retry_controller(2, 3, 2);
  CHECK(retry != NULL);
  resilient_restart_state s;
  memset(&s, 0, sizeof s);
  s.world_size = 4;
  s.active_world_size = 4;
  s.iteration = 1;
  CHECK(resilient_restart_health_check_run(retry, &s) == RESILIENT_RESTART_OK);
  s.iteration = 2;
  CHECK(resilient_restart_health_check_run(retry, &s) == RESILIENT_RESTART_ABORTED);
  CHECK(strstr(resilient_restart_last_error(), "maxIterations") != NULL);
  s.iteration = 0;
  s.world_size = 2;
  CHECK(resilient_restart_health_check_run(retry, &s) == RESILIENT_RESTART_ABORTED);
  s.world_size = 4;
  s.active_world_size = 1;
  CHECK(resilient_restart_health_check_run(retry, &s) == RESILIENT_RESTART_ABORTED);
  resilient_restart_health_check_destroy(retry);
  CHECK(resilient_restart_retry_controller(-2, 1, 1) == NULL);
  CHECK(resilient_restart_retry_controller(0, 1, 1) == NULL);
  retry = resilient_restart_retry_controller(-1, 1, 1); /* no limit */
  CHECK(retry != NULL);
  s.iteration = 1000;
  s.active_world_size = 1;
  CHECK(resilient_restart_health_check_run(retry, &s) == RESILIENT_RESTART_OK);
  resilient_restart_health_check_destroy(retry);
}

/* A function's own failure text reaches the error. */
static void test_function_error_text(void) {
  struct counters c = {0, 0, 0, 0, 0, 0};
  resilient_restart_options* o = one_rank_options(&c);
  /* The storm limit's error quotes the recurring fault from its records. */
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_STORM_LIMIT, 1) ==
        RESILIENT_RESTART_OK);
  CHECK(resilient_restart_options_set_int(o, RESILIENT_RESTART_OPT_RESTART_BACKOFF_MS, 1) ==
        RESILIENT_RESTART_OK);
  resilient_restart_wrapper* w = resilient_restart_wrapper_create(o);
  resilient_restart_options_destroy(o);
  if (w != NULL) {
    CHECK(resilient_restart_run(w, fail_with_text, NULL) == RESILIENT_RESTART_ABORTED);
    CHECK(strstr(resilient_restart_last_error(), "the C function's own words") != NULL);
    resilient_restart_wrapper_destroy(w);
  }
}

int main(void) {
  test_fails_twice_then_completes();
  test_retry_limit();
  test_bad_input();
  test_version();
  test_options_by_name();
  test_constants();
  test_store_client();
  test_rank_assignment();
  test_tree_apply_and_retry_controller();
  test_function_error_text();
  if (failures == 0) {
    printf("all C API checks passed\n");
  }
  return failures == 0 ? 0 : 1;
}
