/* A plugin that claims a future ABI version: the engine must refuse it. */
#include <stddef.h>

#include "strata_tuner_plugin.h"

static strata_tuner_session* create(const strata_search_space* space, const strata_setting* settings,
                                    size_t num_settings, char* error, size_t error_size) {
  (void)space;
  (void)settings;
  (void)num_settings;
  (void)error;
  (void)error_size;
  return NULL;
}
static int ask(strata_tuner_session* s, int64_t* n, strata_knob_value* v, char* e, size_t es) {
  (void)s;
  (void)n;
  (void)v;
  (void)e;
  (void)es;
  return 0;
}
static int tell(strata_tuner_session* s, int64_t n, strata_trial_state st, double o, const char* r, char* e,
                size_t es) {
  (void)s;
  (void)n;
  (void)st;
  (void)o;
  (void)r;
  (void)e;
  (void)es;
  return 0;
}
static void destroy(strata_tuner_session* s) { (void)s; }

static const strata_tuner_plugin plugin = {STRATA_TUNER_ABI_VERSION + 1, "test_wrong_abi", create, ask, tell,
                                           destroy};

__attribute__((visibility("default"))) const strata_tuner_plugin* strata_tuner_plugin_v1(void) { return &plugin; }
