// The plugin ABI: a C test plugin is loaded, asked and told through Tuner;
// plugins with another ABI version, without the entry symbol, or missing
// altogether are refused with errors that name the file and the fix.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <limits>

#include "strata_tuner_plugin.h"
#include "tune/tuner.hpp"
#include "tune/tuner_plugin.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

using test::contains;
using test::expect_error;

SearchSpace mixed_space() {
  SearchSpace space;
  space.add(Knob{"store.prefetch_depth", "test", KnobType::integer, 1, 8, false, {}});
  space.add(Knob{"store.l1_mb", "test", KnobType::real, 1, 64, true, {}});
  space.add(Knob{"store.policy", "test", KnobType::categorical, 0, 0, false, {"lru", "lfu"}});
  return space;
}

TuneOptions options_for(const std::string& plugin) {
  TuneOptions options;
  options.plugin = plugin;
  options.trials = 10;
  options.seed = 1234;
  return options;
}

// What the test plugin recorded at its last tell (read through dlsym on the same library).
struct LastTell {
  int64_t number = -1;
  int state = -1;
  double objective = 0;
  std::string reason;
  int count = 0;
};

LastTell last_tell() {
  void* library = dlopen(STRATA_TEST_GOOD_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(library, nullptr) << "the test plugin should be loaded already";
  using Query = void (*)(int64_t*, int*, double*, const char**, int*);
  auto query = reinterpret_cast<Query>(dlsym(library, "good_plugin_last_tell"));
  LastTell last;
  const char* reason = nullptr;
  query(&last.number, &last.state, &last.objective, &reason, &last.count);
  last.reason = reason;
  dlclose(library);
  return last;
}

TEST(TunePluginAbi, TestPluginIsLoadedAskedAndTold) {
  Tuner tuner(options_for(STRATA_TEST_GOOD_PLUGIN), mixed_space());
  EXPECT_EQ(tuner.plugin().name(), "test_good");

  auto first = tuner.ask();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->number, 100);
  ASSERT_EQ(first->settings.size(), 3u);
  EXPECT_EQ(first->settings[0].name, "store.prefetch_depth");
  EXPECT_EQ(first->settings[0].text, "1");
  EXPECT_EQ(first->settings[1].text, "64");
  EXPECT_EQ(first->settings[2].text, "lru");

  auto second = tuner.ask();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->number, 101);
  EXPECT_EQ(second->settings[0].text, "2");
  EXPECT_EQ(second->settings[1].text, "63.75");
  EXPECT_EQ(second->settings[2].text, "lfu");

  const int told_before = last_tell().count;
  tuner.tell(*first, TrialOutcome::completed(4.5));
  LastTell last = last_tell();
  EXPECT_EQ(last.count, told_before + 1);
  EXPECT_EQ(last.number, 100);
  EXPECT_EQ(last.state, STRATA_TRIAL_COMPLETE);
  EXPECT_DOUBLE_EQ(last.objective, 4.5);

  tuner.tell(*second, TrialOutcome::pruned("store.l1_mb over the limit"));
  last = last_tell();
  EXPECT_EQ(last.number, 101);
  EXPECT_EQ(last.state, STRATA_TRIAL_PRUNED);
  EXPECT_EQ(last.reason, "store.l1_mb over the limit");

  // A non-finite objective reaches the plugin as a failure with a reason.
  auto third = tuner.ask();
  ASSERT_TRUE(third.has_value());
  tuner.tell(*third, TrialOutcome::completed(std::numeric_limits<double>::quiet_NaN()));
  last = last_tell();
  EXPECT_EQ(last.state, STRATA_TRIAL_FAILED);
  EXPECT_TRUE(contains(last.reason, "not finite"));

  // The test plugin has 3 trials; then the search is exhausted.
  EXPECT_FALSE(tuner.ask().has_value());
}

TEST(TunePluginAbi, SettingsReachThePlugin) {
  Tuner tuner(options_for(STRATA_TEST_GOOD_PLUGIN), mixed_space());
  void* library = dlopen(STRATA_TEST_GOOD_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);
  auto seed = reinterpret_cast<const char* (*)()>(dlsym(library, "good_plugin_seed_setting"));
  EXPECT_STREQ(seed(), "1234");
  dlclose(library);
}

TEST(TunePluginAbi, PluginRefusalsBecomeErrorsWithTheirFix) {
  Tuner tuner(options_for(STRATA_TEST_GOOD_PLUGIN), mixed_space());
  Trial never_asked{7, {}};
  Error told = expect_error([&] { tuner.tell(never_asked, TrialOutcome::completed(1)); });
  EXPECT_TRUE(contains(told.what_failed(), "trial 7 was never asked")) << told.what();

  SearchSpace refused = mixed_space();
  refused.add(Knob{"refuse_me", "test", KnobType::integer, 0, 1, false, {}});
  Error create = expect_error([&] { Tuner t(options_for(STRATA_TEST_GOOD_PLUGIN), refused); });
  EXPECT_TRUE(contains(create.what_failed(), "test plugin refuses knob refuse_me")) << create.what();
  EXPECT_TRUE(contains(create.what_failed(), STRATA_TEST_GOOD_PLUGIN)) << create.what();
  EXPECT_EQ(create.how_to_fix(), "remove knob refuse_me");
}

TEST(TunePluginAbi, TrialBudgetEndsTheSearch) {
  TuneOptions options = options_for(STRATA_TEST_GOOD_PLUGIN);
  options.trials = 2;
  Tuner tuner(options, mixed_space());
  EXPECT_TRUE(tuner.ask().has_value());
  EXPECT_TRUE(tuner.ask().has_value());
  EXPECT_FALSE(tuner.ask().has_value());
  EXPECT_EQ(tuner.asked(), 2);
}

TEST(TunePluginAbi, WrongAbiVersionIsRefused) {
  Error error = expect_error([] { TunerPlugin::load(STRATA_TEST_WRONG_ABI_PLUGIN); });
  EXPECT_TRUE(contains(error.what_failed(), STRATA_TEST_WRONG_ABI_PLUGIN)) << error.what();
  EXPECT_TRUE(contains(error.what_failed(), "ABI version " + std::to_string(STRATA_TUNER_ABI_VERSION + 1)))
      << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "rebuild the plugin")) << error.what();
}

TEST(TunePluginAbi, MissingEntrySymbolIsRefused) {
  Error error = expect_error([] { TunerPlugin::load(STRATA_TEST_NO_ENTRY_PLUGIN); });
  EXPECT_TRUE(contains(error.what_failed(), STRATA_TEST_NO_ENTRY_PLUGIN)) << error.what();
  EXPECT_TRUE(contains(error.what_failed(), "does not export strata_tuner_plugin_v1")) << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "extern \"C\"") || contains(error.how_to_fix(), "C linkage"))
      << error.what();
}

TEST(TunePluginAbi, MissingFileIsRefused) {
  Error by_path = expect_error([] { TunerPlugin::load("/nonexistent/libstrata_tuner_x.so"); });
  EXPECT_TRUE(contains(by_path.what_failed(), "/nonexistent/libstrata_tuner_x.so")) << by_path.what();
  EXPECT_TRUE(contains(by_path.what_failed(), "does not exist")) << by_path.what();
  EXPECT_TRUE(contains(by_path.how_to_fix(), "tune.plugin")) << by_path.what();

  Error by_name = expect_error([] { TunerPlugin::load("no_such_tuner"); });
  EXPECT_TRUE(contains(by_name.what_failed(), "libstrata_tuner_no_such_tuner.so")) << by_name.what();
  EXPECT_TRUE(contains(by_name.how_to_fix(), "grid | random | optuna")) << by_name.what();

  Error bad_name = expect_error([] { TunerPlugin::load("grid;rm"); });
  EXPECT_TRUE(contains(bad_name.what_failed(), "tune.plugin")) << bad_name.what();
}

TEST(TunePluginAbi, AFileThatIsNotALibraryIsRefused) {
  const std::string dir = test::scratch_dir("notalib");
  const std::string path = dir + "/libstrata_tuner_text.so";
  FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("not an ELF file\n", file);
  std::fclose(file);
  Error error = expect_error([&] { TunerPlugin::load(path); });
  EXPECT_TRUE(contains(error.what_failed(), "cannot load tuner plugin " + path)) << error.what();
}

TEST(TunePluginAbi, ShortNamesAreFoundInTheBuildAndInTheSearchPath) {
  EXPECT_EQ(TunerPlugin::load("grid").name(), "grid");
  EXPECT_EQ(TunerPlugin::load("random").name(), "random");
  EXPECT_TRUE(contains(TunerPlugin::locate("grid"), "libstrata_tuner_grid.so"));

  setenv("STRATA_TUNER_PLUGIN_PATH", "/nonexistent:" STRATA_TEST_PLUGIN_DIR, 1);
  EXPECT_EQ(TunerPlugin::load("test_good").name(), "test_good");
  EXPECT_EQ(TunerPlugin::search_directories().front(), "/nonexistent");
  unsetenv("STRATA_TUNER_PLUGIN_PATH");
  Error gone = expect_error([] { TunerPlugin::load("test_good"); });
  EXPECT_TRUE(contains(gone.how_to_fix(), "STRATA_TUNER_PLUGIN_PATH")) << gone.what();
}

}  // namespace
}  // namespace strata
