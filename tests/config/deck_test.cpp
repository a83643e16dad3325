// Deck parsing: defaults, INI + command-line precedence, and clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/error.hpp"
#include "config/deck.hpp"
#include "deck_test_util.hpp"

namespace strata {
namespace {

using testing_util::write_deck;

std::string error_of(const std::vector<std::string>& args) {
  return testing_util::error_message([&] { parse_run_options(args); });
}

TEST(Deck, DefaultsWithoutDeck) {
  RunOptions o = parse_run_options({});
  EXPECT_EQ(o.train.batch_size, 256);
  EXPECT_EQ(o.store.mode, "tiered");
  EXPECT_EQ(o.data.source, "synthetic");
}

TEST(Deck, CommandLineOverridesDeck) {
  std::string deck = write_deck("a.ini", "[train]\nbatch_size = 64\nsteps = 10\n[layout]\ntrainers = 3\n");
  RunOptions o = parse_run_options({"--config", deck, "--train.batch_size=32"});
  EXPECT_EQ(o.train.batch_size, 32);
  EXPECT_EQ(o.train.steps, 10);
  EXPECT_EQ(o.layout.trainers, 3);
  EXPECT_EQ(o.config_path, deck);
}

TEST(Deck, UnknownKeyNamesKeyAndSuggestion) {
  std::string deck = write_deck("b.ini", "[train]\nbatchsize = 64\n");
  std::string message = error_of({"--config", deck});
  EXPECT_NE(message.find("train.batchsize"), std::string::npos) << message;
  EXPECT_NE(message.find("train.batch_size"), std::string::npos) << message;
  EXPECT_NE(message.find(deck), std::string::npos) << message;
  message = error_of({"--store.prefetch=2"});
  EXPECT_NE(message.find("store.prefetch"), std::string::npos) << message;
  EXPECT_NE(message.find("store.prefetch_depth"), std::string::npos) << message;
}

TEST(Deck, BadValues) {
  EXPECT_NE(error_of({"--store.mode=cache"}).find("allowed values: ps, tiered"), std::string::npos);
  EXPECT_NE(error_of({"--data.source=parquet"}).find("criteo, csv, synthetic"), std::string::npos);
  EXPECT_NE(error_of({"--train.batch_size=abc"}).find("batch_size"), std::string::npos);
  EXPECT_NE(error_of({"--train.batch_size=0"}).find("train.batch_size must be >= 1"), std::string::npos);
  EXPECT_NE(error_of({"--store.prefetch_depth=0"}).find("store.prefetch_depth"), std::string::npos);
  EXPECT_NE(error_of({"--model.top_mlp=64,x"}).find("model.top_mlp"), std::string::npos);
  EXPECT_NE(error_of({"--data.source=criteo"}).find("data.train"), std::string::npos);
  EXPECT_NE(error_of({"--data.source=csv", "--data.train=x.csv"}).find("data.csv_columns"), std::string::npos);
}

// A message holds every needle (and names no raw byte of a binary deck).
void expect_message(const std::vector<std::string>& args, const std::vector<std::string>& needles) {
  const std::string message = error_of(args);
  ASSERT_FALSE(message.empty()) << "accepted: " << args.back();
  for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
}

TEST(Deck, BadValuesNameTheKeyTheLineAndWhatIsExpected) {
  expect_message({"--train.batch_size=1000000000000"},
                 {"'1000000000000'", "train.batch_size", "on the command line", "[-2147483648, 2147483647]"});
  expect_message({"--store.admission_counters=1e10"}, {"'1e10'", "an integer", "without an exponent"});
  expect_message({"--data.strict=maybe"}, {"data.strict", "true or false"});
  expect_message({"--train.batch_size=5", "--train.batch_size=6"}, {"--train.batch_size", "twice"});
  const std::string bad = write_deck("bad_value.ini", "# a comment\n[train]\nsteps = 5\nbatch_size = 1e3\n");
  expect_message({"--config", bad}, {"'1e3'", "train.batch_size", bad, "line 4", "an integer"});
  const std::string twice = write_deck("twice.ini", "[train]\nbatch_size = 12\n[model]\nkind = din\n[train]\nbatch_size = 14\n");
  expect_message({"--config", twice}, {"train.batch_size", "more than once", "lines 2 and 6", "keep one"});
  const std::string unknown = write_deck("unknown.ini", "[train]\n\nbatch_sizee = 3\n");
  expect_message({"--config", unknown}, {"train.batch_sizee", "line 3", "train.batch_size"});
  // A binary file: named with its line, its bytes never echoed.
  const std::string binary = write_deck("binary.ini", std::string("[train]\nsteps = \x01\xff\x00\x7f\n", 19));
  const std::string message = error_of({"--config", binary});
  EXPECT_NE(message.find("line 2 holds binary data"), std::string::npos) << message;
  EXPECT_EQ(message.find('\xff'), std::string::npos) << "raw bytes in the message";
}

TEST(Deck, BudgetsMustFitInMemory) {
  expect_message({"--store.l1_mb=1000000000"}, {"store.l1_mb", "does not fit in this machine's memory", "MiB"});
  expect_message({"--store.l2_mb=1e12"}, {"store.l2_mb", "lower store.l2_mb"});
  expect_message({"--autotune.max_l1_mb=1e9"}, {"autotune.max_l1_mb"});
  expect_message({"--store.admission_counters=100000000000"}, {"store.admission_counters", "MiB of counters"});
  EXPECT_NO_THROW(parse_run_options({"--store.l1_mb=1", "--store.l2_mb=2"}));
}

TEST(Deck, TuneObjectiveAndCoTraining) {
  expect_message({"--tune.objective=auc"}, {"tune.objective", "eval_auc", "eval_logloss"});
  expect_message({"--tune.co_train=0"}, {"tune.co_train", "from 1"});
  expect_message({"--tune.co_train=65"}, {"tune.co_train"});
  const RunOptions options = parse_run_options({"--tune.objective=eval_logloss", "--tune.co_train=3"});
  EXPECT_EQ(options.tune.objective, "eval_logloss");
  EXPECT_EQ(options.tune.co_train, 3);
}

TEST(Deck, MissingOrDirectoryDeck) {
  EXPECT_NE(error_of({"--config", "/nonexistent.ini"}).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of({"--config", testing::TempDir()}).find("not a regular file"), std::string::npos);
}

TEST(Deck, ToIniRoundTrips) {
  RunOptions o = parse_run_options({"--train.batch_size=48", "--model.top_mlp=16,8", "--data.strict=true"});
  std::string deck = write_deck("c.ini", to_ini(o));
  RunOptions back = parse_run_options({"--config", deck});
  EXPECT_EQ(back.train.batch_size, 48);
  EXPECT_EQ(back.model.top_mlp, "16,8");
  EXPECT_TRUE(back.data.strict);
  EXPECT_EQ(to_ini(back), to_ini(o));
}

TEST(Deck, HelpListsEveryKeyWithDefault) {
  std::string help = deck_help();
  for (const char* key : {"layout.producers", "data.source", "train.batch_size", "store.prefetch_depth",
                          "output.dir", "optim.sparse_lr"}) {
    EXPECT_NE(help.find(key), std::string::npos) << key;
  }
  EXPECT_NE(help.find("(=256)"), std::string::npos) << help;
}

// layout.dp x layout.sp x layout.ep = layout.trainers; dp = 0 takes the rest, and the
// deck then records the value it took.
TEST(Deck, ParallelLayout) {
  RunOptions o = parse_run_options({"--layout.trainers=4"});
  EXPECT_EQ(o.layout.dp, 4);
  EXPECT_EQ(o.layout.sp, 1);
  EXPECT_EQ(o.layout.ep, 1);
  EXPECT_NE(to_ini(o).find("[layout]\nproducers = 1\ntrainers = 4\nservers = 1\ndp = 4\nsp = 1\nsp_min_len = 256\n"
                          "sp_mode = ring\nep = 1\n"),
            std::string::npos)
      << to_ini(o);
  const std::string mismatch = error_of({"--layout.trainers=4", "--layout.dp=3"});
  for (const char* part : {"layout.dp = 3", "layout.sp = 1", "layout.ep = 1", "layout.trainers = 4"}) {
    EXPECT_NE(mismatch.find(part), std::string::npos) << mismatch;
  }
  const std::string indivisible = error_of({"--layout.trainers=3", "--layout.ep=2"});
  EXPECT_NE(indivisible.find("does not divide"), std::string::npos) << indivisible;
  EXPECT_NE(error_of({"--layout.trainers=2", "--layout.ep=0"}).find("layout.ep"), std::string::npos);
  // Sequence parallel: sasrec and hstu only; alltoall needs heads divisible by sp.
  const std::string sp = error_of({"--layout.trainers=2", "--layout.sp=2"});
  EXPECT_NE(sp.find("layout.sp = 2 shares attention"), std::string::npos) << sp;
  EXPECT_NE(sp.find("model.kind = dlrm"), std::string::npos) << sp;
  const std::vector<std::string> hstu = {"--layout.trainers=2", "--layout.sp=2", "--model.kind=hstu",
                                         "--data.source=synthetic_sequences", "--data.sequence_task=next_item"};
  EXPECT_EQ(parse_run_options(hstu).layout.sp, 2);
  std::vector<std::string> heads = hstu;
  heads.insert(heads.end(), {"--layout.sp_mode=alltoall", "--model.hstu_heads=3", "--model.embedding_dim=12"});
  const std::string alltoall = error_of(heads);
  for (const char* part : {"layout.sp_mode = alltoall", "model.hstu_heads = 3", "layout.sp = 2"})
    EXPECT_NE(alltoall.find(part), std::string::npos) << alltoall;
  std::vector<std::string> mode = hstu;
  mode.push_back("--layout.sp_mode=ulysses");
  EXPECT_NE(error_of(mode).find("layout.sp_mode"), std::string::npos);
}

TEST(Deck, ParseIntList) {
  EXPECT_EQ(parse_int_list("64, 32 ,1", "k"), (std::vector<int>{64, 32, 1}));
  EXPECT_THROW(parse_int_list("", "k"), Error);
  EXPECT_THROW(parse_int_list("4,-1", "k"), Error);
  EXPECT_THROW(parse_int_list("4,,1", "k"), Error);
}

}  // namespace
}  // namespace strata
