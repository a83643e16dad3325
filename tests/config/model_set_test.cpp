// Decks of several models: each model's section replaces the shared keys for it
// alone, the command line applies to all (or to one with --model.NAME.KEY),
// and mistakes name the key, the line or the model.
#include <gtest/gtest.h>

#include "config/model_set.hpp"
#include "deck_test_util.hpp"

namespace strata {
namespace {

const char* kDeck =
    "[models]\n"                   // 1
    "names = a, b\n"               // 2
    "[train]\n"                    // 3
    "batch_size = 64\n"            // 4
    "[optim]\n"                    // 5
    "sparse_lr = 0.05\n"           // 6
    "[output]\n"                   // 7
    "dir = runs/job\n"             // 8
    "[model.a]\n"                  // 9
    "kind = dlrm\n"                // 10
    "optim.sparse_lr = 0.1\n"      // 11
    "[model.b]\n"                  // 12
    "kind = din\n"                 // 13
    "layout.trainers = 2\n";       // 14

using testing_util::write_deck;

std::string error_of(const std::vector<std::string>& args) {
  return testing_util::error_message([&] { parse_model_set(args); });
}

TEST(ModelSet, SectionsReplaceTheSharedKeysPerModel) {
  const ModelSet set = parse_model_set({"--config", write_deck("set.ini", kDeck)});
  ASSERT_EQ(set.models.size(), 2u);
  EXPECT_TRUE(set.co_trained());
  const RunOptions& a = set.models[0].options;
  const RunOptions& b = set.models[1].options;
  EXPECT_EQ(set.models[0].name, "a");
  EXPECT_EQ(a.model.kind, "dlrm");
  EXPECT_EQ(b.model.kind, "din");
  EXPECT_FLOAT_EQ(a.optim.sparse_lr, 0.1f);
  EXPECT_FLOAT_EQ(b.optim.sparse_lr, 0.05f);  // the shared value
  EXPECT_EQ(a.layout.trainers, 1);
  EXPECT_EQ(b.layout.trainers, 2);
  EXPECT_EQ(a.train.batch_size, 64);
  EXPECT_EQ(b.train.batch_size, 64);
  EXPECT_EQ(set.output_dir, "runs/job");
  EXPECT_EQ(a.output.dir, "runs/job/a");
  EXPECT_EQ(b.output.dir, "runs/job/b");
  EXPECT_EQ(model_set_world_size(set), 3 + 4);
}

TEST(ModelSet, CommandLineForAllAndForOne) {
  const std::string deck = write_deck("set.ini", kDeck);
  const ModelSet set = parse_model_set({"--config", deck, "--train.batch_size=32", "--model.b.train.batch_size=16",
                                        "--model.a.optim.sparse_lr=0.2", "--checkpoint.dir=/tmp/ck"});
  EXPECT_EQ(set.models[0].options.train.batch_size, 32);
  EXPECT_EQ(set.models[1].options.train.batch_size, 16);  // the model's own wins over the shared one
  EXPECT_FLOAT_EQ(set.models[0].options.optim.sparse_lr, 0.2f);  // and over its section
  EXPECT_EQ(set.models[0].options.checkpoint.dir, "/tmp/ck/a");
  EXPECT_EQ(set.models[1].options.checkpoint.dir, "/tmp/ck/b");
}

TEST(ModelSet, OnlyOneModel) {
  const ModelSet set = parse_model_set({"--config", write_deck("set.ini", kDeck), "--models.only=b"});
  ASSERT_EQ(set.models.size(), 1u);
  EXPECT_EQ(set.models[0].name, "b");
  EXPECT_EQ(set.models[0].options.model.kind, "din");
  EXPECT_EQ(set.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(error_of({"--config", write_deck("set.ini", kDeck), "--models.only=c"}).find("a, b"), std::string::npos);
}

TEST(ModelSet, ADeckOfOneModelIsUnchanged) {
  const ModelSet set = parse_model_set({"--config", write_deck("one.ini", "[train]\nbatch_size = 8\n")});
  ASSERT_EQ(set.models.size(), 1u);
  EXPECT_FALSE(set.co_trained());
  EXPECT_EQ(set.models[0].name, "");
  EXPECT_EQ(set.models[0].options.train.batch_size, 8);
  EXPECT_NE(error_of({"--config", write_deck("one.ini", "[train]\nbatch_size = 8\n"), "--models.only=a"})
                .find("lists no models"),
            std::string::npos);
}

TEST(ModelSet, MistakesNameKeyLineOrModel) {
  auto deck_error = [](const std::string& text) { return error_of({"--config", write_deck("bad.ini", text)}); };
  std::string text = kDeck;
  std::string e = deck_error(text + "data.train = x.csv\n");
  EXPECT_NE(e.find("data.train"), std::string::npos) << e;
  EXPECT_NE(e.find("line 15"), std::string::npos) << e;
  EXPECT_NE(e.find("shared by every model"), std::string::npos) << e;
  e = deck_error(text + "embeding_dim = 8\n");
  EXPECT_NE(e.find("unknown key 'embeding_dim'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 15"), std::string::npos) << e;
  e = deck_error(text + "optim.sparse_lr = quick\n");  // in [model.b]
  EXPECT_NE(e.find("model 'b'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 15"), std::string::npos) << e;
  e = deck_error(text + "[model.c]\nkind = dlrm\n");
  EXPECT_NE(e.find("[model.c]"), std::string::npos) << e;
  EXPECT_NE(e.find("does not list"), std::string::npos) << e;
  e = deck_error(std::string("[models]\nnames = a, a\n"));
  EXPECT_NE(e.find("listed twice"), std::string::npos) << e;
  e = deck_error(std::string("[models]\nnames = a, b c\n"));
  EXPECT_NE(e.find("bad model name 'b c'"), std::string::npos) << e;
  e = deck_error(std::string("[models]\nnames = a\nonly = a\n"));
  EXPECT_NE(e.find("models.only"), std::string::npos) << e;
  e = deck_error(text + "[model.a]\nkind = din\n");
  EXPECT_NE(e.find("appears twice"), std::string::npos) << e;
  EXPECT_NE(error_of({"--config", write_deck("set.ini", kDeck), "--model.a.kind"}).find("has no value"),
            std::string::npos);
}

}  // namespace
TEST(ModelSet, ShareTablesNamesTheModelsThatTrainOneSetOfTables) {
  const std::string deck = write_deck("share.ini", std::string(kDeck) + "[store]\nmode = ps\n");
  // kDeck's models differ in optim.sparse_lr and layout.trainers: refused, naming the first difference.
  const std::string unequal = error_of({"--config", deck, "--models.share_tables=a,b"});
  EXPECT_NE(unequal.find("model 'b' in models.share_tables on the command line sets layout.trainers unlike 'a'"),
            std::string::npos) << unequal;
  const ModelSet set = parse_model_set({"--config", deck, "--models.share_tables=b, a", "--model.a.optim.sparse_lr=0.05",
                                        "--model.b.layout.trainers=1"});
  EXPECT_EQ(set.share_tables, (std::vector<std::string>{"b", "a"}));  // b's servers hold them; b's gradients add first
  // One model alone has its tables to itself.
  EXPECT_TRUE(parse_model_set({"--config", deck, "--models.share_tables=a,b", "--models.only=a"}).share_tables.empty());
  EXPECT_NE(error_of({"--config", deck, "--models.share_tables=a,a"}).find("'a' twice"), std::string::npos);
  EXPECT_NE(error_of({"--config", deck, "--models.share_tables=a,c"}).find("'c', which models.names does not list"),
            std::string::npos);
  const std::string tiered = error_of({"--config", write_deck("share_tiered.ini", kDeck), "--models.share_tables=a,b"});
  EXPECT_NE(tiered.find("store.mode = tiered"), std::string::npos) << tiered;
}

}  // namespace strata
