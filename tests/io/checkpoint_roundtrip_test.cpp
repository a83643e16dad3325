// Checkpoint round trip under mpiexec (np 1, 2, 4): every rank writes its rows
// (different counts, rank 1 none), one rank the dense part, another the trainer
// state, the last ranks producer records; a serial reader on every rank and a
// parallel reader reading slices see exactly what was written, bit for bit, and
// the file's params digest equals params_digest of the same numbers.
#include <gtest/gtest.h>
#include <mpi.h>

#include "checkpoint_fixture.hpp"
#include "io/params_digest.hpp"
#include "../common/mpi_test_util.hpp"

namespace strata::io {
using strata::mpi_test::world_rank;
using strata::mpi_test::world_size;

namespace {

using testing::CheckpointCase;
using testing::same_bits;
using testing::ScratchDirectory;

void expect_rows_equal(const SparseRows& expected, int64_t begin, const SparseRows& got) {
  ASSERT_EQ(got.width, expected.width);
  for (size_t i = 0; i < got.ids.size(); ++i) {
    const size_t e = size_t(begin) + i;
    ASSERT_EQ(got.ids[i], expected.ids[e]) << "row " << e;
    ASSERT_EQ(got.counts[i], expected.counts[e]) << "row " << e;
    ASSERT_EQ(std::memcmp(got.values.data() + i * size_t(got.width), expected.values.data() + e * size_t(got.width),
                          size_t(got.width) * sizeof(float)),
              0)
        << "row " << e;
  }
}

// Everything but the rows, from any reader.
void expect_small_parts_equal(const CheckpointCase& c, const CheckpointReader& reader) {
  const CheckpointHeader want = c.header();
  const CheckpointHeader& got = reader.header();
  EXPECT_EQ(got.format_version, kCheckpointFormatVersion);
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.step_in_epoch, want.step_in_epoch);
  EXPECT_EQ(got.samples, want.samples);
  EXPECT_EQ(got.epoch_samples, want.epoch_samples);
  EXPECT_EQ(got.train_seconds, want.train_seconds);
  EXPECT_EQ(got.config_ini, want.config_ini);
  EXPECT_EQ(got.strata_version, want.strata_version);
  EXPECT_EQ(got.producers, want.producers);
  EXPECT_EQ(got.trainers, want.trainers);
  EXPECT_EQ(got.servers, want.servers);
  EXPECT_EQ(got.store_mode, want.store_mode);
  EXPECT_EQ(got.num_dense, want.num_dense);
  EXPECT_EQ(got.num_tables, want.num_tables);
  EXPECT_EQ(got.embedding_dim, want.embedding_dim);
  EXPECT_EQ(got.row_width, want.row_width);
  EXPECT_EQ(got.dense_optimizer, want.dense_optimizer);
  EXPECT_EQ(got.sparse_optimizer, want.sparse_optimizer);
  EXPECT_EQ(got.dense_optimizer_steps, want.dense_optimizer_steps);
  EXPECT_EQ(got.train_seed, want.train_seed);
  EXPECT_EQ(got.data_seed, want.data_seed);
  EXPECT_EQ(got.admission_counters, want.admission_counters);
  EXPECT_EQ(got.run_id, want.run_id);
  EXPECT_EQ(got.deck_fingerprint, want.deck_fingerprint);

  const auto slices = reader.dense_slices();
  const auto want_slices = c.slices();
  ASSERT_EQ(slices.size(), want_slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].name, want_slices[i].name);
    EXPECT_EQ(slices[i].offset, want_slices[i].offset);
    EXPECT_EQ(slices[i].shape, want_slices[i].shape);
  }
  EXPECT_EQ(reader.num_dense_values(), int64_t(c.dense_values().size()));
  EXPECT_TRUE(same_bits(reader.dense_values(), c.dense_values()));
  EXPECT_TRUE(same_bits(reader.dense_optimizer_state(), c.dense_state()));

  const TrainerState t = reader.trainer_state(), wt = c.trainer_state();
  EXPECT_EQ(t.window_loss, wt.window_loss);
  EXPECT_EQ(t.window_samples, wt.window_samples);
  EXPECT_EQ(t.window_steps, wt.window_steps);
  EXPECT_EQ(t.last_window_loss, wt.last_window_loss);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.last_levels[i], wt.last_levels[i]);

  const auto producers = reader.producers();
  ASSERT_EQ(int(producers.size()), c.producers);
  for (int p = 0; p < c.producers; ++p) {
    const ProducerState& got_p = producers[size_t(p)];
    const ProducerState want_p = c.producer_state(p);
    EXPECT_EQ(got_p.producer, want_p.producer);
    EXPECT_EQ(got_p.epoch, want_p.epoch);
    EXPECT_EQ(got_p.round_in_epoch, want_p.round_in_epoch);
    EXPECT_EQ(got_p.byte_offset, want_p.byte_offset);
    EXPECT_EQ(got_p.line, want_p.line);
    EXPECT_EQ(got_p.shard_begin, want_p.shard_begin);
    EXPECT_EQ(got_p.shard_end, want_p.shard_end);
    EXPECT_EQ(got_p.lines, want_p.lines);
    EXPECT_EQ(got_p.samples, want_p.samples);
    EXPECT_EQ(got_p.malformed, want_p.malformed);
    EXPECT_EQ(got_p.admission_seen, want_p.admission_seen);
    EXPECT_EQ(got_p.admission_defaulted, want_p.admission_defaulted);
    if (c.admission_counters > 0) {
      EXPECT_EQ(reader.admission_counters(p), c.admission(p));
    } else {
      EXPECT_TRUE(reader.admission_counters(p).empty());
    }
  }
}

// Small blocks and rounds, so that a few hundred rows make many of both.
CheckpointWriterOptions small_blocks() {
  CheckpointWriterOptions options;
  options.block_rows = 16;
  options.round_blocks = 3;
  return options;
}

TEST(CheckpointRoundTrip, SerialAndParallelReadersSeeEveryBit) {
  CheckpointCase c;
  c.world = world_size();
  c.producers = std::min(2, c.world);
  const ScratchDirectory dir(MPI_COMM_WORLD);
  const std::string path = dir.file("ckpt-0000000500.h5");
  c.write(MPI_COMM_WORLD, path, small_blocks());
  MPI_Barrier(MPI_COMM_WORLD);

  const SparseRows all = c.all_rows();
  {  // every rank alone
    const CheckpointReader reader(MPI_COMM_SELF, path);
    expect_small_parts_equal(c, reader);
    ASSERT_EQ(reader.num_rows(), int64_t(all.ids.size()));
    expect_rows_equal(all, 0, reader.read_rows(0, reader.num_rows()));
    // Ranges that start and end inside blocks, one row, none.
    const int64_t n = reader.num_rows();
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{7, 41}, {n - 3, n}, {n / 2, n / 2 + 1}, {5, 5}}) {
      const SparseRows part = reader.read_rows(begin, end);
      ASSERT_EQ(int64_t(part.ids.size()), end - begin);
      expect_rows_equal(all, begin, part);
    }
  }
  {  // all ranks together, each reading its slice
    const CheckpointReader reader(MPI_COMM_WORLD, path);
    expect_small_parts_equal(c, reader);
    const int64_t n = reader.num_rows(), ranks = world_size(), rank = world_rank();
    const int64_t begin = n * rank / ranks, end = n * (rank + 1) / ranks;
    expect_rows_equal(all, begin, reader.read_rows(begin, end));
  }
  EXPECT_EQ(checkpoint_params_digest(path),
            params_digest(c.dense_values(), c.dense_state(), c.header().dense_optimizer_steps, testing::sorted_rows(all)));
  validate_checkpoint(path, ExpectedShape{int64_t(c.dense_values().size()), 13, c.dim, c.width, c.num_tables, "adam", "adagrad"},
                      /*verify_rows=*/true);
}

// Default options (one block per rank here): the layout runs use.
TEST(CheckpointRoundTrip, DefaultBlocks) {
  CheckpointCase c;
  c.world = world_size();
  c.producers = 1;
  c.admission_counters = 0;
  c.dense_optimizer = "adagrad";
  const ScratchDirectory dir(MPI_COMM_WORLD);
  const std::string path = dir.file("ckpt-0000000500.h5");
  c.write(MPI_COMM_WORLD, path);
  MPI_Barrier(MPI_COMM_WORLD);
  const CheckpointReader reader(MPI_COMM_SELF, path);
  expect_small_parts_equal(c, reader);
  expect_rows_equal(c.all_rows(), 0, reader.read_rows(0, reader.num_rows()));
}

// No rows anywhere, no producers, sgd (no optimizer state), rows without state.
TEST(CheckpointRoundTrip, EmptyPartsRoundTrip) {
  CheckpointCase c;
  c.world = world_size();
  c.rows = false;
  c.producers = 0;
  c.admission_counters = 0;
  c.dense_optimizer = "sgd";
  c.width = c.dim;
  const ScratchDirectory dir(MPI_COMM_WORLD);
  const std::string path = dir.file("ckpt-0000000000.h5");
  c.write(MPI_COMM_WORLD, path, small_blocks());
  MPI_Barrier(MPI_COMM_WORLD);
  const CheckpointReader reader(MPI_COMM_SELF, path);
  expect_small_parts_equal(c, reader);
  EXPECT_EQ(reader.num_rows(), 0);
  EXPECT_TRUE(reader.read_rows(0, 0).ids.empty());
  EXPECT_TRUE(reader.dense_optimizer_state().empty());
  EXPECT_EQ(checkpoint_params_digest(path), params_digest(c.dense_values(), {}, 500, SparseRows{c.width, {}, {}, {}}));
  validate_checkpoint(path, ExpectedShape{}, /*verify_rows=*/true);
}

// A directory that does not exist: every rank gets the same clear error.
TEST(CheckpointRoundTrip, MissingDirectoryIsAClearError) {
  CheckpointCase c;
  c.world = world_size();
  const ScratchDirectory dir(MPI_COMM_WORLD);
  const std::string path = dir.file("no/such/dir/ckpt-0000000500.h5.tmp");
  try {
    CheckpointWriter writer(MPI_COMM_WORLD, path, c.header());
    ADD_FAILURE() << "created a file in a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create checkpoint '" + path + "'"), std::string::npos) << e.what();
    EXPECT_NE(e.how_to_fix().find("checkpoint.dir exists"), std::string::npos) << e.what();
  }
}

// A mistake on one rank makes every rank throw the same error (no rank is left
// waiting in a collective call), and the writer still closes.
TEST(CheckpointRoundTrip, OneRankMistakeFailsEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  CheckpointCase c;
  c.world = world_size();
  const ScratchDirectory dir(MPI_COMM_WORLD);
  const int rank = world_rank();
  {
    CheckpointWriter writer(MPI_COMM_WORLD, dir.file("two-owners.h5.tmp"), c.header());
    const bool mine = rank < 2;  // two ranks claim the dense part
    try {
      writer.write_dense(mine ? c.slices() : std::vector<model::ParameterSlice>{}, mine ? c.dense_values() : std::vector<float>{},
                         mine ? c.dense_state() : std::vector<float>{}, mine);
      ADD_FAILURE() << "two owners accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("2 ranks passed mine = true"), std::string::npos) << e.what();
    }
  }
  {
    CheckpointWriter writer(MPI_COMM_WORLD, dir.file("bad-width.h5.tmp"), c.header());
    SparseRows rows = c.rows_on(rank);
    if (rank == 1) rows = c.rows_on(0), rows.width = c.width - 1;  // only rank 1 is wrong
    try {
      writer.write_rows(rows);
      ADD_FAILURE() << "a row width that disagrees with the header was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rows of width 11, the header's row_width is 12"), std::string::npos)
          << e.what();
    }
  }
  {
    CheckpointWriter writer(MPI_COMM_WORLD, dir.file("incomplete.h5.tmp"), c.header());
    writer.write_rows(c.rows_on(rank));
    try {
      writer.close();
      ADD_FAILURE() << "an incomplete checkpoint closed without an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("never called: write_dense write_trainer_state write_producers"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace strata::io
