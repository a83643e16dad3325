/* A tuner plugin in plain C for the ABI tests: proposes a fixed, predictable
 * sequence of 3 trials, then is exhausted; remembers the last tell so that the
 * test can check what reached the plugin (good_plugin_last_tell). A knob named
 * "refuse_me" makes create() fail with a message and a fix line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata_tuner_plugin.h"

#define EXPORT __attribute__((visibility("default")))
#define TRIALS 3
#define MAX_KNOBS 16

struct strata_tuner_session {
  size_t num_knobs;
  strata_knob_type types[MAX_KNOBS];
  double low[MAX_KNOBS];
  double high[MAX_KNOBS];
  size_t num_candidates[MAX_KNOBS];
  int64_t next_trial;
};

static int64_t last_number = -1;
static int last_state = -1;
static double last_objective = 0;
static char last_reason[256];
static int tell_count = 0;
static char last_seed[64];

EXPORT void good_plugin_last_tell(int64_t* number, int* state, double* objective, const char** reason, int* count) {
  *number = last_number;
  *state = last_state;
  *objective = last_objective;
  *reason = last_reason;
  *count = tell_count;
}

EXPORT const char* good_plugin_seed_setting(void) { return last_seed; }

static strata_tuner_session* good_create(const strata_search_space* space, const strata_setting* settings,
                                         size_t num_settings, char* error, size_t error_size) {
  size_t i;
  strata_tuner_session* session;
  if (space->num_knobs > MAX_KNOBS) {
    snprintf(error, error_size, "too many knobs");
    return NULL;
  }
  for (i = 0; i < space->num_knobs; ++i) {
    if (strcmp(space->knobs[i].name, "refuse_me") == 0) {
      snprintf(error, error_size, "test plugin refuses knob refuse_me\nfix: remove knob refuse_me");
      return NULL;
    }
  }
  last_seed[0] = '\0';
  for (i = 0; i < num_settings; ++i) {
    if (strcmp(settings[i].key, "seed") == 0) snprintf(last_seed, sizeof(last_seed), "%s", settings[i].value);
  }
  session = calloc(1, sizeof(*session));
  session->num_knobs = space->num_knobs;
  for (i = 0; i < space->num_knobs; ++i) {
    session->types[i] = space->knobs[i].type;
    session->low[i] = space->knobs[i].low;
    session->high[i] = space->knobs[i].high;
    session->num_candidates[i] = space->knobs[i].num_candidates;
  }
  return session;
}

/* Trial n: integer knobs low + n, float knobs high - n / 4, categorical candidate n mod count. */
static int good_ask(strata_tuner_session* session, int64_t* trial_number, strata_knob_value* values,
                    char* error, size_t error_size) {
  size_t i;
  int64_t n = session->next_trial;
  (void)error;
  (void)error_size;
  if (n >= TRIALS) return 0;
  for (i = 0; i < session->num_knobs; ++i) {
    memset(&values[i], 0, sizeof(values[i]));
    if (session->types[i] == STRATA_KNOB_INTEGER) values[i].integer = (int64_t)session->low[i] + n;
    if (session->types[i] == STRATA_KNOB_FLOAT) values[i].real = session->high[i] - (double)n / 4;
    if (session->types[i] == STRATA_KNOB_CATEGORICAL) values[i].category = (uint64_t)n % session->num_candidates[i];
  }
  *trial_number = 100 + n; /* numbers are the plugin's to choose */
  session->next_trial = n + 1;
  return 1;
}

static int good_tell(strata_tuner_session* session, int64_t trial_number, strata_trial_state state, double objective,
                     const char* reason, char* error, size_t error_size) {
  if (trial_number < 100 || trial_number >= 100 + session->next_trial) {
    snprintf(error, error_size, "trial %lld was never asked", (long long)trial_number);
    return -1;
  }
  last_number = trial_number;
  last_state = (int)state;
  last_objective = objective;
  snprintf(last_reason, sizeof(last_reason), "%s", reason);
  ++tell_count;
  return 0;
}

static void good_destroy(strata_tuner_session* session) { free(session); }

static const strata_tuner_plugin plugin = {STRATA_TUNER_ABI_VERSION, "test_good", good_create, good_ask, good_tell,
                                           good_destroy};

EXPORT const strata_tuner_plugin* strata_tuner_plugin_v1(void) { return &plugin; }
