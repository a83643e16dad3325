// DIN under sequence parallel (model/din_activation_unit.hpp) on 2 and 4 ranks: DIN
// trained with its activation unit's events shared over the group gives bit for bit
// the losses, dense gradients and row gradients of every rank training its own batch
// alone (layout.sp = 1), over ragged histories (no bag, a candidate only, 1 and 7
// events, lengths not multiples of 2k or of a tile, histories cut into chunks and
// whole ones), also when a rank has no history at all. A history's scores do not
// depend on the rest of the batch.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/mpi_sequence_group.hpp"
#include "comm/parallel_groups.hpp"
#include "model/din.hpp"
#include "model/din_activation_unit.hpp"
#include "model_test_util.hpp"
#include "../common/mpi_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;

using strata::mpi_test::world_rank;
using strata::mpi_test::world_size;

namespace {

constexpr int kDinDim = 4;

// Bag lengths (history events + the candidate) of rank r's samples; 0 is an empty bag.
std::vector<int> rank_bags(int r, bool empty) {
  if (empty && r == 1) return {0, 1, 1};
  return {2, 0, 8, 1, 14 + r, 132 + 5 * r, 3, 65, 211 + 3 * r, 30};
}

// Table 0 one-hot, table 1 the target-last history bags; 2 dense features.
Fixture din_fixture(const std::vector<int>& bags, uint64_t seed) {
  Fixture f;
  strata::data::Batch& b = f.batch;
  b.size = int(bags.size());
  b.num_dense = 2;
  b.dense = random_vector(bags.size() * 2, seed + 1, 0.0f, 2.0f);
  std::vector<std::vector<int32_t>> one_hot, history;
  const int items = 40;
  for (size_t s = 0; s < bags.size(); ++s) {
    b.labels.push_back(float((s + seed) % 2));
    one_hot.push_back({int32_t(s % 3)});
    std::vector<int32_t> bag;
    for (int i = 0; i < bags[s]; ++i) bag.push_back(int32_t((7 * s + 3 * i + i * i / 5 + seed) % items));
    history.push_back(bag);
  }
  b.tables.push_back(make_bags(one_hot, 3));
  b.tables.push_back(make_bags(history, items));
  for (size_t t = 0; t < b.tables.size(); ++t) {
    const size_t U = b.tables[t].unique_keys.size();
    f.rows.push_back(random_vector(U * kDinDim, seed + 10 + t, -0.5f, 0.5f));
    f.grads.emplace_back(U * kDinDim, 0.0f);
  }
  return f;
}

ModelOptions din_options() {
  ModelOptions o = small_din_options();
  o.embedding_dim = kDinDim;
  o.bottom_mlp = "5,4";
  o.din_attention_mlp = "7,3";
  return o;
}

struct Steps {
  std::vector<double> losses;
  std::vector<std::vector<float>> dense, rows;
  SequenceParallelStats stats;
};

// Three SGD steps on the rank's batch (dense gradients summed over the ranks, as the
// trainers do), so later steps see trained weights.
Steps train(SequenceGroup* group, int min_len, bool empty) {
  Din model(din_options(), 2, 2, 7);
  model.set_sequence_group(group, {min_len, SequenceParallelMode::kRing});
  Fixture f = din_fixture(rank_bags(world_rank(), empty), 31 + uint64_t(world_rank()));
  Steps out;
  for (int step = 0; step < 3; ++step) {
    out.losses.push_back(model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.05f));
    auto& p = model.parameters();
    out.dense.push_back(p.grads());
    for (const auto& g : f.grads) out.rows.push_back(g);
    MPI_Allreduce(MPI_IN_PLACE, p.grads().data(), int(p.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < p.size(); ++i) p.values()[i] -= 0.1f * p.grads()[i];
  }
  out.stats = model.take_sequence_parallel_stats();
  return out;
}

struct Case {
  int min_len;
  bool empty;  // rank 1 has no history
};

class DinSequenceParallel : public ::testing::TestWithParam<Case> {};

TEST_P(DinSequenceParallel, EqualsSpOneBitForBit) {
  const Case c = GetParam();
  const Steps reference = train(nullptr, c.min_len, c.empty);
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, world_size(), 1});
  strata::comm::MpiSequenceGroup group(groups);
  const Steps shared = train(&group, c.min_len, c.empty);
  ASSERT_EQ(shared.losses.size(), reference.losses.size());
  for (size_t s = 0; s < reference.losses.size(); ++s) {
    EXPECT_EQ(shared.losses[s], reference.losses[s]) << "step " << s;
    EXPECT_TRUE(bits_equal(shared.dense[s], reference.dense[s])) << "dense gradients, step " << s;
  }
  for (size_t t = 0; t < reference.rows.size(); ++t) EXPECT_TRUE(bits_equal(shared.rows[t], reference.rows[t])) << t;
  EXPECT_GT(group.bytes_exchanged(), 0u);
  EXPECT_EQ(shared.stats.steps, 3);
  EXPECT_GT(shared.stats.split_sequences, 0);  // the histories of over 64 events are cut into chunks
  EXPECT_GE(shared.stats.max_mean_worst, 1.0);
  EXPECT_GT(shared.stats.bytes_forward + shared.stats.bytes_backward, 0);
  EXPECT_EQ(reference.stats.steps, 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, DinSequenceParallel,
                         ::testing::Values(Case{16, false}, Case{0, false}, Case{100, false}, Case{16, true}));

// A history's scores and gradients are its own: the same history beside other
// samples, or alone, gives the same bits (the tiles are anchored at each history).
TEST(DinActivationUnit, HistoryIsBatchInvariant) {
  if (world_rank() != 0) return;
  Din model(din_options(), 2, 2, 3);
  Fixture alone = din_fixture({150}, 5);
  Fixture beside = din_fixture({9, 150, 70}, 5);
  // Give the shared history the same rows in both batches.
  const auto& bags_a = alone.batch.tables[1];
  const auto& bags_b = beside.batch.tables[1];
  for (size_t p = 0; p < 150; ++p) {
    const int32_t ua = bags_a.index[p], ub = bags_b.index[size_t(bags_b.offsets[1]) + p];
    for (int d = 0; d < kDinDim; ++d)
      beside.rows[1][size_t(ub) * kDinDim + d] = alone.rows[1][size_t(ua) * kDinDim + d];
  }
  std::vector<float> pa(1), pb(3);
  for (Fixture* f : {&alone, &beside}) {
    f->batch.dense.assign(f->batch.dense.size(), 0.5f);
    for (auto& r : f->rows[0]) r = 0.25f;
  }
  model.predict(alone.batch, alone.row_ptrs(), pa.data());
  model.predict(beside.batch, beside.row_ptrs(), pb.data());
  EXPECT_EQ(pa[0], pb[1]);
}

}  // namespace
