// Moe under expert parallel, on 2 and 4 ranks: every layout dp x ep of the rank
// count gives bit for bit the dense gradients (after the trainers' sum in trainer
// order), row gradients, losses and predictions of ep = 1, where each rank runs
// every expert on its own batch. Dropless and with capacity (a trainer's batch
// routes the same in every layout), top-1 and top-2.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/mpi_expert_group.hpp"
#include "comm/parallel_groups.hpp"
#include "model/moe.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {

// Rank r's batch: B samples, 3 dense features, 2 tables; a pure function of r.
Fixture rank_batch(int rank, int B, int dim) {
  Fixture f;
  Batch& b = f.batch;
  const uint64_t seed = 100 + 17 * uint64_t(rank);
  strata::CounterRng rng(seed);
  b.size = B;
  b.num_dense = 3;
  for (int i = 0; i < B; ++i) b.labels.push_back(rng.uniform() < 0.4 ? 1.0f : 0.0f);
  b.dense = random_vector(size_t(B) * 3, seed + 1, 0.0f, 2.0f);
  for (int t = 0; t < 2; ++t) {
    std::vector<std::vector<int32_t>> bags(static_cast<size_t>(B));
    for (int i = 0; i < B; ++i) bags[size_t(i)] = {int32_t(rng.next() % 9), int32_t(rng.next() % 9)};
    b.tables.push_back(make_bags(bags, 9));
    f.rows.push_back(random_vector(size_t(9) * dim, seed + 10 + t, -0.5f, 0.5f));
    f.grads.emplace_back(size_t(9) * dim, 0.0f);
  }
  return f;
}

ModelOptions options(int top_k, double capacity_factor) {
  ModelOptions o;
  o.kind = "moe";
  o.embedding_dim = 4;
  o.bottom_mlp = "8,4";
  o.top_mlp = "6,3";
  o.num_experts = 4;
  o.top_k = top_k;
  o.capacity_factor = capacity_factor;
  o.aux_loss_weight = 0.01;
  return o;
}

struct StepResult {
  double loss = 0;
  std::vector<float> dense;                // after the sum over the trainers in trainer order
  std::vector<std::vector<float>> rows;    // this rank's row gradients
  std::vector<float> probs;                // predictions of the batch after the step's update
};

// Two steps of plain SGD (so the second step sees trained weights), then predict.
StepResult train(const ModelOptions& o, ExpertGroup* group) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Moe model(o, 3, 2, 11);
  model.set_expert_group(group);
  Fixture f = rank_batch(rank, 13 + rank, 4);  // ranks' batches of different sizes
  StepResult result;
  for (int step = 0; step < 2; ++step) {
    result.loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f / (13.0f * size));
    auto& p = model.parameters();
    strata::comm::ordered_allreduce_sum(p.grads().data(), int(p.size()), MPI_COMM_WORLD);
    for (size_t i = 0; i < p.size(); ++i) p.values()[i] -= 0.5f * p.grads()[i];
  }
  result.dense = model.parameters().grads();
  result.rows = f.grads;
  result.probs.resize(size_t(f.batch.size));
  model.predict(f.batch, f.row_ptrs(), result.probs.data());
  return result;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  int top_k;
  double capacity_factor;
};

class MoeExpertParallel : public ::testing::TestWithParam<Case> {};

TEST_P(MoeExpertParallel, EveryLayoutEqualsEpOneBitForBit) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelOptions o = options(GetParam().top_k, GetParam().capacity_factor);
  const StepResult reference = train(o, nullptr);
  for (int ep = 2; ep <= size; ++ep) {
    if (size % ep != 0 || o.num_experts % ep != 0) continue;
    strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{size / ep, 1, ep});
    strata::comm::MpiExpertGroup group(groups);
    const StepResult sharded = train(o, &group);
    const std::string layout = "dp " + std::to_string(size / ep) + " x ep " + std::to_string(ep);
    EXPECT_EQ(sharded.loss, reference.loss) << layout;
    EXPECT_TRUE(bits_equal(sharded.dense, reference.dense)) << layout;
    for (size_t t = 0; t < reference.rows.size(); ++t) EXPECT_TRUE(bits_equal(sharded.rows[t], reference.rows[t]));
    EXPECT_TRUE(bits_equal(sharded.probs, reference.probs)) << layout;
    EXPECT_GT(group.bytes_exchanged(), 0u) << layout;
  }
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeExpertParallel,
                         ::testing::Values(Case{1, 0.0}, Case{2, 0.0}, Case{2, 0.6}));

}  // namespace
