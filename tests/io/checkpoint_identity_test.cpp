// Run identity of checkpoints: run ids, the resume rule of every deck key, the
// key-by-key deck comparison a resume makes (with decks of older builds), the
// fingerprint, and files without a run id (written before run ids) still read.
#include <gtest/gtest.h>
#include <mpi.h>

#include <set>
#include <string>

#include "checkpoint_fixture.hpp"
#include "config/deck.hpp"
#include "io/checkpoint_identity.hpp"

namespace strata::io {
namespace {

std::string defaults() { return to_ini(RunOptions{}); }

std::vector<std::string> keys_of(const std::vector<DeckConflict>& conflicts) {
  std::vector<std::string> keys;
  for (const DeckConflict& c : conflicts) keys.push_back(c.key);
  return keys;
}

// `ini` without the line of key `name` in section `section` (a deck of a build
// that did not know the key).
std::string without_key(const std::string& ini, const std::string& section, const std::string& name) {
  const size_t at_section = ini.find("[" + section + "]\n");
  EXPECT_NE(at_section, std::string::npos);
  const size_t at = ini.find("\n" + name + " = ", at_section);
  EXPECT_NE(at, std::string::npos) << name;
  const size_t end = ini.find('\n', at + 1);
  return ini.substr(0, at) + ini.substr(end);
}

TEST(CheckpointIdentity, RunIdsAreSixteenHexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = new_run_id();
    EXPECT_EQ(id.size(), 16u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(CheckpointIdentity, RulesOfTheDeckKeys) {
  for (const char* key : {"layout.trainers", "layout.servers", "layout.producers", "train.steps", "train.epochs",
                          "train.eval", "store.l1_mb", "store.policy", "store.prefetch_depth", "checkpoint.dir",
                          "checkpoint.keep", "checkpoint.overwrite", "output.dir", "output.log_level",
                          "links.network_gbps", "autotune.online", "tune.trials", "data.max_errors_reported"}) {
    EXPECT_EQ(resume_rule(key), ResumeRule::kMayDiffer) << key;
  }
  for (const char* key : {"train.seed", "optim.dense_lr", "optim.sparse", "model.embedding_dim", "model.kind",
                          "data.data_seed", "data.train", "data.vocab_sizes", "store.mode", "store.min_count",
                          "store.admission_counters", "a.key.added.later", "checkpointing.x", "layout.trainersx"}) {
    EXPECT_EQ(resume_rule(key), ResumeRule::kMustMatch) << key;
  }
  EXPECT_EQ(resume_rule("train.batch_size"), ResumeRule::kGlobalBatch);
}

TEST(CheckpointIdentity, ConflictsNameEachKeyThatChangesTheNumbers) {
  RunOptions written;
  written.layout.trainers = 2;
  written.train.batch_size = 128;
  RunOptions resumed = written;
  EXPECT_TRUE(resume_deck_conflicts(to_ini(written), to_ini(resumed), defaults()).empty());
  // Resharding at the same global batch, run length, caches, outputs: allowed.
  resumed.layout.trainers = 4;
  resumed.layout.servers = 3;
  resumed.train.batch_size = 64;
  resumed.train.steps = 999;
  resumed.store.l1_mb = 1;
  resumed.checkpoint.dir = "elsewhere";
  resumed.checkpoint.resume = "latest";
  resumed.output.dir = "other";
  EXPECT_TRUE(resume_deck_conflicts(to_ini(written), to_ini(resumed), defaults()).empty());
  EXPECT_EQ(deck_fingerprint(to_ini(written), defaults()), deck_fingerprint(to_ini(resumed), defaults()));
  // Seed, learning rate and the global batch: each named with both values.
  resumed.train.seed = 2;
  resumed.optim.dense_lr = 0.002f;
  resumed.train.batch_size = 128;
  const auto conflicts = resume_deck_conflicts(to_ini(written), to_ini(resumed), defaults());
  EXPECT_EQ(keys_of(conflicts), (std::vector<std::string>{"optim.dense_lr", "train.batch_size", "train.seed"}));
  const std::string text = describe_conflicts(conflicts);
  EXPECT_NE(text.find("train.seed: '1' in the checkpoint, '2' in this run"), std::string::npos) << text;
  EXPECT_NE(text.find("optim.dense_lr: '0.001' in the checkpoint, '0.002' in this run"), std::string::npos) << text;
  EXPECT_NE(text.find("global batch"), std::string::npos) << text;
  EXPECT_NE(text.find("256 in the checkpoint, 512 in this run"), std::string::npos) << text;
  EXPECT_NE(deck_fingerprint(to_ini(written), defaults()), deck_fingerprint(to_ini(resumed), defaults()));
}

TEST(CheckpointIdentity, KeysMissingFromAnOlderDeckTakeTheirDefault) {
  RunOptions options;
  const std::string older = without_key(to_ini(options), "model", "row_init_scale");
  EXPECT_TRUE(resume_deck_conflicts(older, to_ini(options), defaults()).empty());
  EXPECT_EQ(deck_fingerprint(older, defaults()), deck_fingerprint(to_ini(options), defaults()));
  options.model.row_init_scale = 0.5f;
  EXPECT_EQ(keys_of(resume_deck_conflicts(older, to_ini(options), defaults())),
            std::vector<std::string>{"model.row_init_scale"});
  // A key this build does not know is ignored.
  EXPECT_TRUE(resume_deck_conflicts(to_ini(options) + "[gone]\nkey = 1\n", to_ini(options), defaults()).empty());
}

TEST(CheckpointIdentity, RunIdIsStoredAndOptional) {
  const testing::ScratchDirectory dir(MPI_COMM_SELF);
  testing::CheckpointCase with, without;
  without.run_id = "";
  with.write(MPI_COMM_SELF, dir.file("with.h5"));
  without.write(MPI_COMM_SELF, dir.file("without.h5"));
  const CheckpointReader a(MPI_COMM_SELF, dir.file("with.h5")), b(MPI_COMM_SELF, dir.file("without.h5"));
  EXPECT_EQ(a.header().run_id, "0123456789abcdef");
  EXPECT_EQ(a.header().deck_fingerprint, "fedcba9876543210");
  EXPECT_EQ(b.header().run_id, "");
  EXPECT_EQ(b.header().deck_fingerprint, "");
  EXPECT_NO_THROW(b.verify(true));
}

}  // namespace
}  // namespace strata::io
