/* strata_tuner_plugin.h: the C ABI between strata and a tuner plugin (version 1).
 *
 * Modelled on the Kokkos Tools tuning interface: the engine declares a search
 * space (knobs with a type, a range or candidate set, and a log-scale flag) and
 * one objective with its direction; the plugin proposes the next trial's values
 * (ask) and receives each trial's result (tell). A plugin is a shared library
 * that exports one C function, STRATA_TUNER_PLUGIN_ENTRY, returning a
 * strata_tuner_plugin. The engine loads it with dlopen and checks abi_version.
 *
 * Rules both sides follow:
 * - Every pointer the engine passes is valid only for the duration of the call;
 *   a plugin copies what it keeps (knob names, candidates, settings).
 * - A function that fails returns a negative value (or NULL) and writes a
 *   NUL-terminated message into `error` (at most error_size bytes). The message
 *   says what failed; it may end with a line "fix: ..." saying how to fix it.
 * - The engine calls a session from one thread at a time.
 * - ABI changes that move or retype a field bump STRATA_TUNER_ABI_VERSION and
 *   the entry symbol's suffix.
 *
 * Writing a plugin: see docs/TUNER.md. Plain C is enough; the built-in grid,
 * random and optuna plugins in plugins/ are examples.
 */
#ifndef STRATA_TUNER_PLUGIN_H
#define STRATA_TUNER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_TUNER_ABI_VERSION 1
/* The one symbol a plugin exports: const strata_tuner_plugin* strata_tuner_plugin_v1(void). */
#define STRATA_TUNER_PLUGIN_ENTRY "strata_tuner_plugin_v1"

typedef enum {
  STRATA_KNOB_INTEGER = 0,     /* whole numbers in [low, high] */
  STRATA_KNOB_FLOAT = 1,       /* real numbers in [low, high] */
  STRATA_KNOB_CATEGORICAL = 2  /* one of candidates[0 .. num_candidates) */
} strata_knob_type;

typedef enum {
  STRATA_MAXIMIZE = 0,
  STRATA_MINIMIZE = 1
} strata_direction;

typedef enum {
  STRATA_TRIAL_COMPLETE = 0, /* the trial ran; `objective` holds its value */
  STRATA_TRIAL_PRUNED = 1,   /* skipped before or while running (e.g. over a memory limit) */
  STRATA_TRIAL_FAILED = 2    /* the trial ran and failed */
} strata_trial_state;

/* One tunable. Numeric knobs use low/high/log_scale; categorical ones use candidates. */
typedef struct strata_knob {
  const char* name;             /* e.g. "store.l1_mb" */
  strata_knob_type type;
  double low;                   /* inclusive bounds (INTEGER: whole numbers) */
  double high;
  int log_scale;                /* nonzero: sample log-uniformly (low > 0) */
  const char* const* candidates;  /* CATEGORICAL: the candidate values as text */
  size_t num_candidates;
} strata_knob;

/* The search: its knobs and the one objective. */
typedef struct strata_search_space {
  const strata_knob* knobs;
  size_t num_knobs;
  const char* objective_name;   /* e.g. "samples_per_s" */
  strata_direction direction;
} strata_search_space;

/* A plugin setting as text, e.g. {"seed", "7"}, {"study", "runs/tune/study.journal"}.
 * The engine passes: seed, grid_points, study, sampler. A plugin ignores keys it
 * does not know. */
typedef struct strata_setting {
  const char* key;
  const char* value;
} strata_setting;

/* One knob's value in a trial; the field matching the knob's type is used. */
typedef struct strata_knob_value {
  int64_t integer;     /* STRATA_KNOB_INTEGER */
  double real;         /* STRATA_KNOB_FLOAT */
  uint64_t category;   /* STRATA_KNOB_CATEGORICAL: index into candidates */
} strata_knob_value;

/* A plugin's per-search state, opaque to the engine. */
typedef struct strata_tuner_session strata_tuner_session;

typedef struct strata_tuner_plugin {
  uint32_t abi_version;   /* STRATA_TUNER_ABI_VERSION the plugin was built with */
  const char* name;       /* short name, e.g. "grid" */

  /* Starts a search. Returns NULL on failure (message in error). */
  strata_tuner_session* (*create)(const strata_search_space* space,
                                  const strata_setting* settings, size_t num_settings,
                                  char* error, size_t error_size);

  /* Proposes the next trial: fills *trial_number and values[0 .. space->num_knobs).
   * Returns 1 for a trial, 0 when the search is exhausted, -1 on failure. */
  int (*ask)(strata_tuner_session* session, int64_t* trial_number, strata_knob_value* values,
             char* error, size_t error_size);

  /* Reports the result of an asked trial. `objective` is meaningful for
   * STRATA_TRIAL_COMPLETE only; `reason` is "" or why it was pruned or failed.
   * Returns 0, or -1 on failure. */
  int (*tell)(strata_tuner_session* session, int64_t trial_number, strata_trial_state state,
              double objective, const char* reason, char* error, size_t error_size);

  /* Ends the search and frees the session (NULL is ignored). */
  void (*destroy)(strata_tuner_session* session);
} strata_tuner_plugin;

/* The type of the entry function a plugin exports under STRATA_TUNER_PLUGIN_ENTRY. */
typedef const strata_tuner_plugin* (*strata_tuner_plugin_entry_fn)(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* STRATA_TUNER_PLUGIN_H */
