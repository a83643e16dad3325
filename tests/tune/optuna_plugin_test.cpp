// The optuna plugin (embedded Python): finds the known optimum of a synthetic
// objective; a second Tuner on the same study file continues it; two processes
// sharing one journal both finish with distinct trial numbers; Python errors
// become strata::Error with a fix.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "strata/config.hpp"
#include "tune/tuner.hpp"
#include "tune_test_util.hpp"

extern char** environ;
namespace fs = std::filesystem;

namespace strata {
namespace {

using test::contains;
using test::expect_error;

TuneOptions optuna_options(const std::string& study, int trials, uint64_t seed = 7) {
  TuneOptions options;
  options.plugin = "optuna";
  options.study = study;
  options.trials = trials;
  options.seed = seed;
  return options;
}

// x in [0, 10] and y in [1, 1024] on a log scale; the best is x = 3, y = 16.
SearchSpace synthetic_space() {
  SearchSpace space;
  space.add(Knob{"x", "test", KnobType::real, 0, 10, false, {}});
  space.add(Knob{"y", "test", KnobType::integer, 1, 1024, true, {}});
  return space;
}

double synthetic_objective(const Trial& trial) {
  const double x = trial.find("x")->number;
  const double y = trial.find("y")->number;
  return -(x - 3) * (x - 3) - (std::log2(y) - 4) * (std::log2(y) - 4);
}

// The study as the test's own Optuna sees it (a separate /usr/bin/python3).
nlohmann::json inspect(const std::string& study) {
  const std::string command = std::string(STRATA_PYTHON_EXECUTABLE) + " " STRATA_TEST_INSPECT_STUDY " '" + study + "'";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << command;
  return nlohmann::json::parse(output);
}

TEST(TuneOptunaPlugin, FindsTheOptimumOfASyntheticObjective) {
  Tuner tuner(optuna_options("", 40), synthetic_space());
  EXPECT_EQ(tuner.plugin().name(), "optuna");
  double best = -1e300;
  Trial best_trial;
  int count = 0;
  while (auto trial = tuner.ask()) {
    const double value = synthetic_objective(*trial);
    tuner.tell(*trial, TrialOutcome::completed(value));
    if (value > best) {
      best = value;
      best_trial = *trial;
    }
    ++count;
  }
  EXPECT_EQ(count, 40);
  // Random search reaches this in about half of its 40-trial runs; TPE in every seed tried.
  EXPECT_GT(best, -0.5) << "best x = " << best_trial.find("x")->text << ", y = " << best_trial.find("y")->text;
  EXPECT_NEAR(best_trial.find("x")->number, 3, 0.71);
  EXPECT_NEAR(std::log2(best_trial.find("y")->number), 4, 0.71);
}

TEST(TuneOptunaPlugin, ASecondTunerContinuesAJournalStudy) {
  const std::string study = test::scratch_dir("journal") + "/sub/study.journal";
  {
    Tuner first(optuna_options(study, 4), synthetic_space());
    std::vector<int64_t> numbers;
    while (auto trial = first.ask()) {
      numbers.push_back(trial->number);
      const TrialOutcome outcome = numbers.size() == 3   ? TrialOutcome::pruned("store.l1_mb over the limit")
                                   : numbers.size() == 4 ? TrialOutcome::failed("rank 2 crashed")
                                                         : TrialOutcome::completed(synthetic_objective(*trial));
      first.tell(*trial, outcome);
    }
    EXPECT_EQ(numbers, (std::vector<int64_t>{0, 1, 2, 3}));
  }
  Tuner second(optuna_options(study, 2), synthetic_space());
  auto trial = second.ask();
  ASSERT_TRUE(trial.has_value());
  EXPECT_EQ(trial->number, 4);
  second.tell(*trial, TrialOutcome::completed(synthetic_objective(*trial)));

  const nlohmann::json stored = inspect(study);
  EXPECT_EQ(stored["direction"], "maximize");
  EXPECT_EQ(stored["objective"], "samples_per_s");
  const auto& trials = stored["trials"];
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[0]["state"], "complete");
  EXPECT_EQ(trials[2]["state"], "pruned");
  EXPECT_EQ(trials[2]["reason"], "store.l1_mb over the limit");
  EXPECT_EQ(trials[3]["state"], "fail");
  EXPECT_EQ(trials[3]["reason"], "rank 2 crashed");
  EXPECT_EQ(trials[4]["number"], 4);
  EXPECT_DOUBLE_EQ(trials[4]["value"].get<double>(), synthetic_objective(*trial));
  EXPECT_DOUBLE_EQ(trials[4]["params"]["x"].get<double>(), trial->find("x")->number);
}

// Best objective of `trials` trials of a Tuner on `study` with `seed`.
double best_of(const std::string& study, int trials, uint64_t seed) {
  Tuner tuner(optuna_options(study, trials, seed), synthetic_space());
  double best = -1e300;
  while (auto trial = tuner.ask()) {
    const double value = synthetic_objective(*trial);
    tuner.tell(*trial, TrialOutcome::completed(value));
    best = std::max(best, value);
  }
  return best;
}

TEST(TuneOptunaPlugin, TheSamplerLearnsFromEarlierRuns) {
  const std::string study = test::scratch_dir("learns") + "/study.journal";
  best_of(study, 30, 7);
  // 30 earlier trials put TPE past its random start-up: the next run's first
  // proposals are already near the optimum. A fresh study with the same seed
  // samples at random first (about -9 for this seed).
  const double continued = best_of(study, 5, 1007);
  const double fresh = best_of("", 5, 1007);
  EXPECT_GT(continued, -1.5);
  EXPECT_GT(continued, fresh);
}

TEST(TuneOptunaPlugin, ASecondTunerContinuesASqliteStudy) {
  const std::string study = test::scratch_dir("sqlite") + "/study.db";
  for (int run = 0; run < 2; ++run) {
    Tuner tuner(optuna_options(study, 2, 100 + run), synthetic_space());
    for (int i = 0; i < 2; ++i) {
      auto trial = tuner.ask();
      ASSERT_TRUE(trial.has_value());
      EXPECT_EQ(trial->number, run * 2 + i);
      tuner.tell(*trial, TrialOutcome::completed(synthetic_objective(*trial)));
    }
  }
  EXPECT_EQ(inspect(study)["trials"].size(), 4u);
}

// Starts `program args...` with stdout into `output` and `extra_env` added to
// the environment; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& output,
            const std::vector<std::string>& extra_env = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> env;
  for (const auto& entry : extra_env) env.push_back(const_cast<char*>(entry.c_str()));
  for (char** entry = environ; *entry != nullptr; ++entry) env.push_back(*entry);
  env.push_back(nullptr);
  pid_t pid = -1;
  const int status = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(status, 0) << "cannot start " << args[0];
  return pid;
}

std::vector<int64_t> numbers_in(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> numbers;
  long long number = 0;
  while (in >> number) numbers.push_back(number);
  return numbers;
}

TEST(TuneOptunaPlugin, TwoProcessesShareOneJournalStudy) {
  const std::string dir = test::scratch_dir("concurrent");
  const std::string study = dir + "/study.journal";
  constexpr int kTrialsEach = 8;
  const pid_t a = spawn({STRATA_TEST_STUDY_WORKER, study, std::to_string(kTrialsEach), "1"}, dir + "/a.txt");
  const pid_t b = spawn({STRATA_TEST_STUDY_WORKER, study, std::to_string(kTrialsEach), "2"}, dir + "/b.txt");
  for (pid_t pid : {a, b}) {
    int status = -1;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << pid << " status " << status;
  }
  const auto from_a = numbers_in(dir + "/a.txt");
  const auto from_b = numbers_in(dir + "/b.txt");
  EXPECT_EQ(from_a.size(), size_t(kTrialsEach));
  EXPECT_EQ(from_b.size(), size_t(kTrialsEach));
  std::set<int64_t> all(from_a.begin(), from_a.end());
  all.insert(from_b.begin(), from_b.end());
  EXPECT_EQ(all.size(), size_t(2 * kTrialsEach)) << "a trial number was handed out twice";
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 2 * kTrialsEach - 1);

  const auto trials = inspect(study)["trials"];
  ASSERT_EQ(trials.size(), size_t(2 * kTrialsEach));
  for (const auto& trial : trials) EXPECT_EQ(trial["state"], "complete");
}

TEST(TuneOptunaPlugin, TheInterpreterIgnoresThePythonEnvironment) {
  // An optuna package on PYTHONPATH that breaks on import, and a bogus PYTHONHOME:
  // the isolated interpreter must use neither.
  const std::string dir = test::scratch_dir("isolated");
  fs::create_directories(dir + "/shadow/optuna");
  std::ofstream(dir + "/shadow/optuna/__init__.py") << "raise ImportError('optuna from PYTHONPATH was imported')\n";
  const pid_t worker = spawn({STRATA_TEST_STUDY_WORKER, dir + "/study.journal", "2", "3"}, dir + "/out.txt",
                             {"PYTHONPATH=" + dir + "/shadow", "PYTHONHOME=/nonexistent", "PYTHONNOUSERSITE=0"});
  int status = -1;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(numbers_in(dir + "/out.txt"), (std::vector<int64_t>{0, 1}));
}

TEST(TuneOptunaPlugin, OtherSamplersRun) {
  for (const char* sampler : {"random", "cmaes"}) {
    TuneOptions options = optuna_options("", 12);
    options.sampler = sampler;
    Tuner tuner(options, synthetic_space());
    int count = 0;
    while (auto trial = tuner.ask()) {
      tuner.tell(*trial, TrialOutcome::completed(synthetic_objective(*trial)));
      ++count;
    }
    EXPECT_EQ(count, 12) << sampler;
  }
}

TEST(TuneOptunaPlugin, PythonErrorsBecomeStrataErrors) {
  TuneOptions unknown = optuna_options("", 3);
  unknown.sampler = "annealing";
  Error sampler = expect_error([&] { Tuner tuner(unknown, synthetic_space()); });
  EXPECT_TRUE(contains(sampler.what_failed(), "tuner plugin optuna")) << sampler.what();
  EXPECT_TRUE(contains(sampler.what_failed(), "unknown sampler 'annealing'")) << sampler.what();
  EXPECT_TRUE(contains(sampler.how_to_fix(), "tpe, random or cmaes")) << sampler.what();

  TuneOptions cmaes = optuna_options("", 3);
  cmaes.sampler = "cmaes";
  SearchSpace categorical = synthetic_space();
  categorical.add(Knob{"store.policy", "test", KnobType::categorical, 0, 0, false, {"lru", "lfu"}});
  Error numeric_only = expect_error([&] { Tuner tuner(cmaes, categorical); });
  EXPECT_TRUE(contains(numeric_only.what_failed(), "numeric knobs only; categorical: store.policy")) << numeric_only.what();
  EXPECT_TRUE(contains(numeric_only.how_to_fix(), "tune.sampler = tpe")) << numeric_only.what();

  // A folder where the journal file should be: an OSError inside Optuna.
  const std::string folder = test::scratch_dir("folder");
  Error unreadable = expect_error([&] { Tuner tuner(optuna_options(folder, 3), synthetic_space()); });
  EXPECT_TRUE(contains(unreadable.what_failed(), folder)) << unreadable.what();
  EXPECT_TRUE(contains(unreadable.how_to_fix(), "tune.study")) << unreadable.what();

  // A file that is not a database: SQLAlchemy's error, wrapped.
  const std::string not_a_db = folder + "/text.db";
  std::ofstream(not_a_db) << "this is not SQLite\n";
  Error corrupt = expect_error([&] { Tuner tuner(optuna_options(not_a_db, 3), synthetic_space()); });
  EXPECT_TRUE(contains(corrupt.what_failed(), "cannot open study")) << corrupt.what();
  EXPECT_TRUE(contains(corrupt.how_to_fix(), "tune.study")) << corrupt.what();

  // A damaged journal (binary bytes, or text that is not JSON lines): named, not a traceback.
  for (const std::string& garbage : {std::string("\xff\xfe\x00\x01 binary\n", 12), std::string("not json\n")}) {
    const std::string journal = folder + "/damaged.log";
    std::ofstream(journal, std::ios::binary) << garbage;
    Error damaged = expect_error([&] { Tuner tuner(optuna_options(journal, 3), synthetic_space()); });
    EXPECT_TRUE(contains(damaged.what_failed(), journal)) << damaged.what();
    EXPECT_TRUE(contains(damaged.what_failed(), "not an Optuna journal") ||
                contains(damaged.what_failed(), "cannot open study")) << damaged.what();
    EXPECT_FALSE(contains(damaged.what_failed(), "Traceback")) << damaged.what();
    EXPECT_TRUE(contains(damaged.how_to_fix(), "tune.study")) << damaged.what();
  }
}

TEST(TuneOptunaPlugin, AStudyKeepsItsCandidates) {
  const std::string study = test::scratch_dir("candidates") + "/study.journal";
  auto space_with = [](std::vector<std::string> policies) {
    SearchSpace space;
    space.add(Knob{"store.policy", "tune.space_policy", KnobType::categorical, 0, 0, false, std::move(policies)});
    return space;
  };
  {
    Tuner first(optuna_options(study, 1), space_with({"lru", "lfu"}));
    auto trial = first.ask();
    first.tell(*trial, TrialOutcome::completed(1));
  }
  Error error = expect_error([&] { Tuner second(optuna_options(study, 1), space_with({"lru", "lfu", "lookahead"})); });
  EXPECT_TRUE(contains(error.what_failed(), "searched store.policy as")) << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "start a new tune.study")) << error.what();
}

TEST(TuneOptunaPlugin, AStudyKeepsItsDirection) {
  const std::string study = test::scratch_dir("direction") + "/study.journal";
  {
    Tuner maximize(optuna_options(study, 1), synthetic_space());
    auto trial = maximize.ask();
    maximize.tell(*trial, TrialOutcome::completed(1));
  }
  Error error = expect_error(
      [&] { Tuner minimize(optuna_options(study, 1), synthetic_space(), Objective{"samples_per_s", Direction::minimize}); });
  EXPECT_TRUE(contains(error.what_failed(), "maximizes its objective")) << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "another tune.study")) << error.what();
}

}  // namespace
}  // namespace strata
