// Sequence parallel (model/sequence_parallel.hpp) on 2 and 4 ranks: sasrec and hstu
// trained with their attention shared over the group give bit for bit the losses,
// dense gradients and row gradients of every rank training its own batch alone
// (layout.sp = 1), in ring and alltoall modes, over ragged histories (0, 1, 7, lengths
// not divisible by 2k, histories split over the group and whole ones), also when a
// rank has no history at all. The kernels' pieces it relies on (a forward from a query
// block on, hstu's bias gradient alone) equal the whole kernels'.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/attention_kernels.hpp"
#include "comm/mpi_sequence_group.hpp"
#include "comm/parallel_groups.hpp"
#include "model/hstu.hpp"
#include "model/sasrec.hpp"
#include "model/sequence_parallel.hpp"
#include "model_test_util.hpp"
#include "next_item_test_util.hpp"
#include "../common/mpi_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
namespace kernels = strata::backend;
using strata::ModelOptions;

using strata::mpi_test::world_rank;
using strata::mpi_test::world_size;

namespace {

// Rank r's histories: ragged, two of them longer than min_len = 16 below.
std::vector<int> rank_lengths(int r, bool empty) {
  if (empty && r == 1) return {0, 0};
  return {1, 7, 13 + r, 70 + 3 * r, 0, 150 + 5 * r, 3, 9 + 2 * r};
}

ModelOptions model_options(const std::string& kind, int heads) {
  ModelOptions o;
  o.kind = kind;
  o.embedding_dim = kDim;
  o.sasrec_heads = o.hstu_heads = heads;
  o.sasrec_blocks = o.hstu_blocks = 2;
  o.sasrec_max_len = o.hstu_max_len = 200;
  o.hstu_buckets = 16;
  return o;
}

std::unique_ptr<Model> make(const ModelOptions& o) {
  if (o.kind == "hstu") return std::make_unique<Hstu>(o, 0, 2, 7);
  return std::make_unique<Sasrec>(o, 0, 2, 7);
}

struct Steps {
  std::vector<double> losses;
  std::vector<std::vector<float>> dense;  // this rank's gradients, every step
  std::vector<std::vector<float>> rows;   // this rank's row gradients, every step and table
};

// Three SGD steps on the rank's batch (dense gradients summed over the ranks, as the
// trainers do), so later steps see trained weights.
Steps train(const ModelOptions& o, SequenceGroup* group, const SequenceParallelOptions& sp, bool empty) {
  std::unique_ptr<Model> model = make(o);
  model->set_sequence_group(group, sp);
  Fixture f = training_fixture(rank_lengths(world_rank(), empty), 31 + uint64_t(world_rank()));
  Steps out;
  for (int step = 0; step < 3; ++step) {
    out.losses.push_back(model->forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.05f));
    auto& p = model->parameters();
    out.dense.push_back(p.grads());
    for (const auto& g : f.grads) out.rows.push_back(g);
    MPI_Allreduce(MPI_IN_PLACE, p.grads().data(), int(p.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < p.size(); ++i) p.values()[i] -= 0.1f * p.grads()[i];
  }
  return out;
}

struct Case {
  std::string kind;
  int heads;
  SequenceParallelMode mode;
  bool empty;  // rank 1 has no history
};

class SequenceParallel : public ::testing::TestWithParam<Case> {};

TEST_P(SequenceParallel, EqualsSpOneBitForBit) {
  const Case c = GetParam();
  const int size = world_size();
  const ModelOptions o = model_options(c.kind, c.heads);
  const SequenceParallelOptions sp{16, c.mode};
  const Steps reference = train(o, nullptr, sp, c.empty);
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, size, 1});
  strata::comm::MpiSequenceGroup group(groups);
  const Steps shared = train(o, &group, sp, c.empty);
  ASSERT_EQ(shared.losses.size(), reference.losses.size());
  for (size_t s = 0; s < reference.losses.size(); ++s) {
    EXPECT_EQ(shared.losses[s], reference.losses[s]) << "step " << s;
    EXPECT_TRUE(bits_equal(shared.dense[s], reference.dense[s])) << "dense gradients, step " << s;
  }
  for (size_t t = 0; t < reference.rows.size(); ++t) EXPECT_TRUE(bits_equal(shared.rows[t], reference.rows[t]));
  EXPECT_GT(group.bytes_exchanged(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Models, SequenceParallel,
    ::testing::Values(Case{"hstu", 4, SequenceParallelMode::kRing, false},
                      Case{"hstu", 1, SequenceParallelMode::kRing, false},
                      Case{"hstu", 4, SequenceParallelMode::kAllToAll, false},
                      Case{"hstu", 4, SequenceParallelMode::kRing, true},
                      Case{"sasrec", 4, SequenceParallelMode::kRing, false},
                      Case{"sasrec", 2, SequenceParallelMode::kRing, true},
                      Case{"sasrec", 4, SequenceParallelMode::kAllToAll, false}));

TEST(SequenceParallelPlan, BalancesWholeHistoriesAndReportsIt) {
  const int size = world_size();
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, size, 1});
  strata::comm::MpiSequenceGroup group(groups);
  SequenceParallelAttention attention(group, kernels::AttentionKind::kHstu, 2, 4, {1000, SequenceParallelMode::kRing});
  // Every rank's batch: 64 histories of lengths 1 .. 64 in a rank-dependent order.
  std::vector<int32_t> offsets{0};
  for (int i = 0; i < 64; ++i) offsets.push_back(offsets.back() + 1 + (i * 37 + 11 * world_rank()) % 64);
  attention.plan(64, offsets.data());
  EXPECT_GE(attention.last_max_mean(), 1.0);
  EXPECT_LT(attention.last_max_mean(), 1.05);
  const SequenceParallelStats stats = attention.take_stats();
  EXPECT_EQ(stats.steps, 1);
  EXPECT_EQ(stats.split_sequences, 0);
}

// Ring mode passes the K/V prefix point to point along a split history's chunks: its
// home sends each of its Q, K, V rows once (at most 3 L W floats, where the home
// sending every chunk its prefix would send about 5.6 L W on 4 members), and the
// output and log-sum-exp rows are the whole kernel's.
TEST(SequenceParallelRing, HomeSendsEachRowOnceAndOutputsEqualTheKernel) {
  const int size = world_size(), me = world_rank();
  const int H = 2, D = 4, W = H * D, L = 1000;
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, size, 1});
  strata::comm::MpiSequenceGroup group(groups);
  SequenceParallelAttention attention(group, kernels::AttentionKind::kCausalSoftmax, H, D,
                                      {16, SequenceParallelMode::kRing});
  const int batch = me == 0 ? 1 : 0;  // one long history, on member 0; the others have none
  const std::vector<int32_t> offsets = me == 0 ? std::vector<int32_t>{0, L} : std::vector<int32_t>{0};
  const int N = offsets.back();
  const auto q = random_vector(size_t(N) * W, 11), k = random_vector(size_t(N) * W, 12),
             v = random_vector(size_t(N) * W, 13);
  attention.plan(batch, offsets.data());
  std::vector<float> out(size_t(N) * W), lse(size_t(N) * H);
  attention.forward(q.data(), k.data(), v.data(), nullptr, 0, out.data(), lse.data());
  const SequenceParallelStats stats = attention.take_stats();
  EXPECT_EQ(stats.split_sequences, 1);
  if (me != 0) return;
  EXPECT_GT(stats.bytes_forward, 0);
  EXPECT_LE(stats.bytes_forward, 3.0 * L * W * sizeof(float));
  const kernels::JaggedAttentionShape shape{1, H, D, offsets.data()};
  kernels::AttentionScratch scratch;
  std::vector<float> want(out.size()), want_lse(lse.size());
  kernels::causal_attention_forward(shape, q.data(), k.data(), v.data(), want.data(), want_lse.data(), scratch);
  EXPECT_TRUE(bits_equal(out, want));
  EXPECT_TRUE(bits_equal(lse, want_lse));
}

TEST(SequenceParallelOptions, AlltoallRefusesHeadsNotDividedByTheGroup) {
  const int size = world_size();
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, size, 1});
  strata::comm::MpiSequenceGroup group(groups);
  expect_error_naming(
      [&] {
        SequenceParallelAttention a(group, kernels::AttentionKind::kHstu, size + 1, 4,
                                    {16, SequenceParallelMode::kAllToAll});
      },
      {"layout.sp_mode", "layout.sp"});
  expect_error_naming([] { parse_sequence_parallel_mode("ulysses"); }, {"layout.sp_mode"});
}

// The kernels' pieces: rows [q0, L) of a forward from first_query = q0 on the first L
// rows equal the whole forward's; hstu's bias gradient alone equals the backward's.
TEST(SequenceParallelKernels, PartialForwardAndBiasGradientEqualTheWholeKernels) {
  const int H = 2, D = 4, W = H * D;
  const std::vector<int32_t> offsets{0, 1, 8, 150, 151, 280};
  const int N = offsets.back();
  const kernels::JaggedAttentionShape shape{5, H, D, offsets.data()};
  const auto q = random_vector(size_t(N) * W, 1), k = random_vector(size_t(N) * W, 2),
             v = random_vector(size_t(N) * W, 3), dout = random_vector(size_t(N) * W, 4);
  const auto bias = random_vector(16, 5, -0.1f, 0.1f);
  kernels::AttentionScratch scratch;
  std::vector<float> out(size_t(N) * W), lse(size_t(N) * H), dq(out.size()), dk(out.size()), dv(out.size()),
      dbias(16), dbias_alone(16);
  kernels::hstu_attention_backward(shape, q.data(), k.data(), v.data(), bias.data(), 16, dout.data(), dq.data(),
                                dk.data(), dv.data(), dbias.data(), scratch);
  kernels::hstu_attention_bias_backward(shape, q.data(), k.data(), v.data(), bias.data(), 16, dout.data(),
                                     dbias_alone.data(), scratch);
  EXPECT_TRUE(bits_equal(dbias, dbias_alone));
  for (const bool softmax : {false, true}) {
    if (softmax)
      kernels::causal_attention_forward(shape, q.data(), k.data(), v.data(), out.data(), lse.data(), scratch);
    else
      kernels::hstu_attention_forward(shape, q.data(), k.data(), v.data(), bias.data(), 16, out.data(), scratch);
    // Sequence 3 (rows 8 .. 150, L = 142) from query 64 and from query 128.
    for (const int q0 : {64, 128}) {
      const int s0 = 8, L = 142;
      const int32_t one[2] = {0, L};
      const kernels::JaggedAttentionShape single{1, H, D, one};
      kernels::AttentionOptions opts;
      opts.first_query = q0;
      opts.hstu_norm = softmax ? 0 : L;
      std::vector<float> part(size_t(L) * W, 0.0f), part_lse(size_t(L) * H, 0.0f);
      if (softmax)
        kernels::causal_attention_forward(single, q.data() + s0 * W, k.data() + s0 * W, v.data() + s0 * W, part.data(),
                                       part_lse.data(), scratch, opts);
      else
        kernels::hstu_attention_forward(single, q.data() + s0 * W, k.data() + s0 * W, v.data() + s0 * W, bias.data(),
                                     16, part.data(), scratch, opts);
      const std::vector<float> want(out.begin() + (s0 + q0) * W, out.begin() + (s0 + L) * W);
      const std::vector<float> got(part.begin() + q0 * W, part.end());
      EXPECT_TRUE(bits_equal(want, got)) << (softmax ? "softmax" : "hstu") << " from query " << q0;
      for (int r = 0; r < q0; ++r) EXPECT_EQ(part[size_t(r) * W], 0.0f) << "rows before first_query are left alone";
    }
  }
  kernels::AttentionOptions bad;
  bad.first_query = 5;
  EXPECT_THROW(kernels::hstu_attention_forward(shape, q.data(), k.data(), v.data(), bias.data(), 16, out.data(), scratch,
                                            bad),
               strata::Error);
}

}  // namespace
