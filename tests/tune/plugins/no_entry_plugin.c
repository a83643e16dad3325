/* A shared library that is not a tuner plugin: it exports no strata_tuner_plugin_v1. */
__attribute__((visibility("default"))) int not_a_tuner_plugin(void) { return 42; }
