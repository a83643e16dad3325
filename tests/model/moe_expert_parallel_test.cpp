// MoeTower under expert parallel, on 2 and 4 ranks, for moe (DLRM's front) and din
// with model.din_tower = moe (DIN's front): every layout dp x ep of the rank
// count gives bit for bit the dense gradients (after the trainers' sum in trainer
// order), row gradients, losses and predictions of ep = 1, where each rank runs
// every expert on its own batch. Dropless and with capacity (a trainer's batch
// routes the same in every layout), top-1 and top-2. Under ep each rank stores
// the replicated weights and its own experts only; its gradients are compared
// with the same part of ep = 1's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/mpi_expert_group.hpp"
#include "comm/parallel_groups.hpp"
#include "common/error.hpp"
#include "model/din.hpp"
#include "model/moe.hpp"
#include "expert_test_util.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {

// Rank r's batch: B samples, 3 dense features, 2 tables; a pure function of r.
Fixture rank_batch(int rank, int B, int dim) {
  const uint64_t seed = 100 + 17 * uint64_t(rank);
  strata::CounterRng rng(seed);
  Fixture f = labelled_fixture(B, 1, 3, seed, rng);
  for (int t = 0; t < 2; ++t) {
    std::vector<std::vector<int32_t>> bags(static_cast<size_t>(B));
    for (int i = 0; i < B; ++i) bags[size_t(i)] = {int32_t(rng.next() % 9), int32_t(rng.next() % 9)};
    add_table(f, bags, 9, dim, seed + 10 + t);
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


// DIN's batch: B samples, 2 dense features, table 0 one-hot, table 1 the history
// bags (history then candidate), lengths 0 to 9; a pure function of the rank.
Fixture din_batch(int rank, int B, int dim) {
  const uint64_t seed = 500 + 13 * uint64_t(rank);
  strata::CounterRng rng(seed);
  Fixture f = labelled_fixture(B, 1, 2, seed, rng);
  std::vector<std::vector<int32_t>> one_hot(static_cast<size_t>(B)), history(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) {
    one_hot[size_t(i)] = {int32_t(rng.next() % 4)};
    const int len = int(rng.next() % 10);
    for (int k = 0; k < len; ++k) history[size_t(i)].push_back(int32_t(rng.next() % 12));
  }
  add_table(f, one_hot, 4, dim, seed + 10);
  add_table(f, history, 12, dim, seed + 11);
  return f;
}

// DIN's small shape with the expert keys of options().
ModelOptions din_options(int top_k, double capacity_factor) {
  const ModelOptions experts = options(top_k, capacity_factor);
  ModelOptions o = small_din_options();
  o.din_tower = "moe";
  o.num_experts = experts.num_experts;
  o.top_k = experts.top_k;
  o.capacity_factor = experts.capacity_factor;
  o.aux_loss_weight = experts.aux_loss_weight;
  return o;
}

struct StepResult {
  double loss = 0;
  std::vector<float> dense;                // after the sum over the trainers in trainer order
  std::vector<std::vector<float>> rows;    // this rank's row gradients
  std::vector<float> probs;                // predictions of the batch after the step's update
};

// Two steps of plain SGD (so the second step sees trained weights), then predict.
// With a group, the gradients are summed as the trainers do: the replicated part
// over every rank in rank order, the experts' from their last replica (it holds
// the chain's sum) to the others.
StepResult train(Model& model, Fixture f, ExpertGroup* group, const strata::comm::ParallelGroups* groups,
                 DenseSharding* sharding_out = nullptr) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  model.set_expert_group(group);
  EXPECT_TRUE(model.sums_gradients_in_trainer_order());
  const DenseSharding* sharding = model.dense_sharding();
  EXPECT_EQ(sharding != nullptr, group != nullptr && group->size() > 1);
  if (sharding && sharding_out) *sharding_out = *sharding;
  StepResult result;
  for (int step = 0; step < 2; ++step) {
    result.loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f / (13.0f * size));
    auto& p = model.parameters();
    sum_dense_gradients_as_trainers(p, sharding, groups);
    for (size_t i = 0; i < p.size(); ++i) p.values()[i] -= 0.5f * p.grads()[i];
  }
  result.dense = model.parameters().grads();
  result.rows = f.grads;
  result.probs.resize(size_t(f.batch.size));
  model.predict(f.batch, f.row_ptrs(), result.probs.data());
  return result;
}

struct Case {
  int top_k;
  double capacity_factor;
  bool din = false;  // DIN's front with model.din_tower = moe, else moe (DLRM's front)
};

// The case's model and this rank's batch (ranks' batches of different sizes).
StepResult train_case(const Case& c, ExpertGroup* group, const strata::comm::ParallelGroups* groups,
                      DenseSharding* sharding_out = nullptr) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (c.din) {
    Din model(din_options(c.top_k, c.capacity_factor), 2, 2, 9);
    return train(model, din_batch(rank, 6 + 3 * rank, 3), group, groups, sharding_out);
  }
  Moe model(options(c.top_k, c.capacity_factor), 3, 2, 11);
  return train(model, rank_batch(rank, 13 + rank, 4), group, groups, sharding_out);
}

class MoeExpertParallel : public ::testing::TestWithParam<Case> {};

TEST_P(MoeExpertParallel, EveryLayoutEqualsEpOneBitForBit) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelOptions o = options(GetParam().top_k, GetParam().capacity_factor);
  const StepResult reference = train_case(GetParam(), nullptr, nullptr);
  for (int ep = 2; ep <= size; ++ep) {
    if (size % ep != 0 || o.num_experts % ep != 0) continue;
    strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{size / ep, 1, ep});
    strata::comm::MpiExpertGroup group(groups);
    DenseSharding sharding;
    const StepResult sharded = train_case(GetParam(), &group, &groups, &sharding);
    const std::string layout = "dp " + std::to_string(size / ep) + " x ep " + std::to_string(ep);
    EXPECT_EQ(sharded.loss, reference.loss) << layout;
    // This rank's part of the whole model: the replicated weights, then its E / ep experts.
    EXPECT_EQ(sharding.full_size, reference.dense.size()) << layout;
    EXPECT_EQ(sharding.members, ep) << layout;
    EXPECT_EQ(sharding.member, groups.ep_rank()) << layout;
    EXPECT_EQ(sharded.dense.size(), sharding.replicated + (reference.dense.size() - sharding.replicated) / size_t(ep))
        << layout;
    EXPECT_TRUE(bits_equal(sharded.dense, sharding.local_of(reference.dense, 1))) << layout;
    for (size_t t = 0; t < reference.rows.size(); ++t) EXPECT_TRUE(bits_equal(sharded.rows[t], reference.rows[t]));
    EXPECT_TRUE(bits_equal(sharded.probs, reference.probs)) << layout;
    EXPECT_GT(group.bytes_exchanged(), 0u) << layout;
  }
}

// The storage really is sharded: another member's expert is not there, and the
// part kept is the whole model's at the place DenseSharding names.
TEST(MoeExpertStorage, EachMemberKeepsItsOwnExperts) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ModelOptions o = options(2, 0.0);
  Moe whole(o, 3, 2, 11);
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, 1, size});
  strata::comm::MpiExpertGroup group(groups);
  Moe part(o, 3, 2, 11);
  part.set_expert_group(&group);
  const DenseSharding* sharding = part.dense_sharding();
  ASSERT_NE(sharding, nullptr);
  EXPECT_TRUE(bits_equal(part.parameters().values(), sharding->local_of(whole.parameters().values(), 1)));
  const int local = o.num_experts / size;
  for (int e = 0; e < o.num_experts; ++e) {
    const bool own = e / local == groups.ep_rank();
    if (own) {
      EXPECT_LE(part.expert_range(e).second, part.parameters().size());
    } else {
      EXPECT_THROW(part.expert_range(e), strata::Error);
    }
  }
  EXPECT_THROW(part.set_expert_group(&group), strata::Error);  // once
  // An optimizer state of two arrays (Adam's moments) splits the same way per array.
  std::vector<float> state(2 * sharding->full_size);
  for (size_t i = 0; i < state.size(); ++i) state[i] = float(i);
  const std::vector<float> local_state = sharding->local_of(state, 2);
  ASSERT_EQ(local_state.size(), 2 * sharding->local_size());
  EXPECT_EQ(local_state[sharding->local_size()], float(sharding->full_size));
  ASSERT_EQ(sharding->segments.size(), 2u);
  EXPECT_TRUE(sharding->segments[1].sharded);
  EXPECT_EQ(local_state[sharding->replicated],
            float(sharding->segments[1].begin + size_t(sharding->member) * sharding->shard_size));
  EXPECT_THROW(sharding->local_of(state, 1), strata::Error);
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeExpertParallel,
                         ::testing::Values(Case{1, 0.0}, Case{2, 0.0}, Case{2, 0.6}, Case{1, 0.0, true},
                                           Case{2, 0.0, true}, Case{2, 0.6, true}));

// DIN's plain top MLP has no experts: a group of more than one is refused, naming layout.ep.
TEST(DinMlpTower, RefusesAnExpertGroup) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ModelOptions o = din_options(1, 0.0);
  o.din_tower = "mlp";
  Din model(o, 2, 2, 9);
  EXPECT_FALSE(model.sums_gradients_in_trainer_order());
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, 1, size});
  strata::comm::MpiExpertGroup group(groups);
  try {
    model.set_expert_group(&group);
    ADD_FAILURE() << "din with an mlp tower took an expert group";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layout.ep"), std::string::npos) << e.what();
  }
}

}  // namespace
