// MultiTask (mmoe, CGC, two-level ple) under expert parallel, on 2 and 4 ranks:
// every layout dp x ep of the rank count gives bit for bit the dense gradients
// (after the trainers' sum in trainer order), row gradients, losses and
// predictions of ep = 1, where each rank runs every expert on its own batch.
// The ranks' batches differ in size, and one rank's is a single sample. Each
// rank stores only its own experts: its gradients are ep = 1's at the places
// DenseSharding names.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/mpi_expert_group.hpp"
#include "comm/parallel_groups.hpp"
#include "common/error.hpp"
#include "model/multi_task.hpp"
#include "expert_test_util.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;

namespace {

struct Case {
  const char* kind;
  int shared, task_experts, levels, tasks;
};

ModelOptions options_of(const Case& c) {
  ModelOptions o;
  o.kind = c.kind;
  o.embedding_dim = 4;
  o.bottom_mlp = "6,4";
  o.expert_mlp = "5,3";
  o.tower_mlp = "4";
  o.num_experts = c.shared;
  o.task_experts = c.task_experts;
  o.ple_levels = c.levels;
  return o;
}

struct StepResult {
  double loss = 0;
  std::vector<float> dense;              // after the sum over the ranks in rank order
  std::vector<std::vector<float>> rows;  // this rank's row gradients
  std::vector<float> probs;              // predictions after the updates
};

// Two steps of plain SGD (the second sees trained weights), then predict. With
// a group the gradients are summed as the trainers do: the replicated part over
// every rank in rank order, the experts' from their last replica to the others.
StepResult train(const Case& c, ExpertGroup* group, const strata::comm::ParallelGroups* groups = nullptr,
                 DenseSharding* sharding_out = nullptr) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MultiTask model(options_of(c), 3, 3, c.tasks, 5);
  model.set_expert_group(group);
  EXPECT_TRUE(model.sums_gradients_in_trainer_order());
  const DenseSharding* sharding = model.dense_sharding();
  EXPECT_EQ(sharding != nullptr, group != nullptr && group->size() > 1);
  if (sharding && sharding_out) *sharding_out = *sharding;
  Fixture f = click_fixture(rank == 1 ? 1 : 7 + 2 * rank, c.tasks, 4, 30 + uint64_t(rank));
  StepResult result;
  for (int step = 0; step < 2; ++step) {
    result.loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f / (8.0f * size));
    auto& p = model.parameters();
    sum_dense_gradients_as_trainers(p, sharding, groups);
    for (size_t i = 0; i < p.size(); ++i) p.values()[i] -= 0.5f * p.grads()[i];
  }
  result.dense = model.parameters().grads();
  result.rows = f.grads;
  result.probs.resize(size_t(f.batch.size) * size_t(c.tasks));
  model.predict(f.batch, f.row_ptrs(), result.probs.data());
  return result;
}

class MultiTaskExpertParallel : public ::testing::TestWithParam<Case> {};

TEST_P(MultiTaskExpertParallel, EveryLayoutEqualsEpOneBitForBit) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Case c = GetParam();
  const int per_level = c.shared + (std::string(c.kind) == "ple" ? c.task_experts * c.tasks : 0);
  const StepResult reference = train(c, nullptr);
  int layouts = 0;
  for (int ep = 2; ep <= size; ++ep) {
    if (size % ep != 0 || per_level % ep != 0) continue;
    strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{size / ep, 1, ep});
    strata::comm::MpiExpertGroup group(groups);
    DenseSharding sharding;
    const StepResult shared = train(c, &group, &groups, &sharding);
    const std::string layout = std::string(c.kind) + " dp " + std::to_string(size / ep) + " x ep " + std::to_string(ep);
    EXPECT_EQ(shared.loss, reference.loss) << layout;
    // One sharded segment per level (its experts), the rest replicated.
    EXPECT_EQ(sharding.full_size, reference.dense.size()) << layout;
    EXPECT_EQ(sharding.member, groups.ep_rank()) << layout;
    size_t sharded_segments = 0, experts = 0;
    for (const auto& segment : sharding.segments) {
      if (segment.sharded) ++sharded_segments, experts += segment.size;
    }
    EXPECT_EQ(sharded_segments, size_t(c.levels)) << layout;
    EXPECT_EQ(shared.dense.size(), reference.dense.size() - experts + experts / size_t(ep)) << layout;
    EXPECT_TRUE(bits_equal(shared.dense, sharding.local_of(reference.dense, 1))) << layout;
    for (size_t t = 0; t < reference.rows.size(); ++t) EXPECT_TRUE(bits_equal(shared.rows[t], reference.rows[t]));
    EXPECT_TRUE(bits_equal(shared.probs, reference.probs)) << layout;
    EXPECT_GT(group.bytes_exchanged(), 0u) << layout;
    ++layouts;
  }
  EXPECT_GT(layouts, 0) << "no layout divides the experts of " << c.kind;
}

// mmoe with 4 shared experts; CGC (one level) and a two-level ple with 2 shared and
// 1 per task of 2 tasks: 4 experts per level.
INSTANTIATE_TEST_SUITE_P(Kinds, MultiTaskExpertParallel,
                         ::testing::Values(Case{"mmoe", 4, 0, 1, 2}, Case{"ple", 2, 1, 1, 2}, Case{"ple", 2, 1, 2, 2}));

// Evaluation: a trainer whose stream has ended takes part with an empty batch;
// the others' predictions are those of ep = 1.
TEST(MultiTaskExpertParallelEval, EmptyBatchTakesPart) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Case c{"ple", 2, 1, 2, 2};
  Fixture f = click_fixture(rank == size - 1 ? 0 : 5, c.tasks, 4, 70 + uint64_t(rank));
  MultiTask alone(options_of(c), 3, 3, c.tasks, 5);
  std::vector<float> expected(size_t(f.batch.size) * c.tasks), got(expected.size());
  if (f.batch.size > 0) alone.predict(f.batch, f.row_ptrs(), expected.data());
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, 1, size});
  strata::comm::MpiExpertGroup group(groups);
  MultiTask shared(options_of(c), 3, 3, c.tasks, 5);
  shared.set_expert_group(&group);
  shared.predict(f.batch, f.row_ptrs(), got.data());
  EXPECT_TRUE(bits_equal(got, expected));
}

// The storage really is sharded: the kept slices are the replicated weights and
// this member's experts, holding the whole model's values; a whole array goes
// back together from every member's shard.
TEST(MultiTaskExpertStorage, EachMemberKeepsItsOwnExperts) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Case c{"ple", 2, 1, 2, 2};  // 4 experts per level, 2 levels
  MultiTask whole(options_of(c), 3, 3, c.tasks, 5);
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, 1, size});
  strata::comm::MpiExpertGroup group(groups);
  MultiTask part(options_of(c), 3, 3, c.tasks, 5);
  part.set_expert_group(&group);
  const DenseSharding* sharding = part.dense_sharding();
  ASSERT_NE(sharding, nullptr);
  EXPECT_TRUE(bits_equal(part.parameters().values(), sharding->local_of(whole.parameters().values(), 1)));
  const int local = 4 / size;
  for (int l = 0; l < c.levels; ++l) {
    for (int i = 0; i < 4; ++i) {
      const std::string name = "level." + std::to_string(l) +
                               (i < 2 ? ".shared." + std::to_string(i) : ".task." + std::to_string(i - 2) + ".0") +
                               ".0.weight";
      const bool own = i / local == groups.ep_rank();
      if (own) {
        const auto& kept = part.parameters().slice(name);
        const auto& full = whole.parameters().slice(name);
        EXPECT_TRUE(std::equal(part.parameters().values().begin() + std::ptrdiff_t(kept.offset),
                               part.parameters().values().begin() + std::ptrdiff_t(kept.offset + kept.size()),
                               whole.parameters().values().begin() + std::ptrdiff_t(full.offset)))
            << name;
      } else {
        EXPECT_THROW(part.parameters().slice(name), strata::Error) << name;
      }
    }
  }
  for (const char* name :
       {"bottom.0.weight", "level.0.gate.shared.weight", "level.1.gate.1.weight", "tower.1.1.bias"}) {
    EXPECT_NO_THROW(part.parameters().slice(name)) << name;
  }
  EXPECT_THROW(part.set_expert_group(&group), strata::Error);  // once
  // Every member's shard puts the whole array back together (what checkpoints store).
  const std::vector<float>& mine = part.parameters().values();
  const std::vector<char> gathered = strata::comm::gather_bytes(
      mine.data() + sharding->replicated, int(sharding->shard_size * sizeof(float)), 0, MPI_COMM_WORLD);
  if (groups.ep_rank() == 0) {
    std::vector<const float*> shards;
    for (int m = 0; m < size; ++m) {
      shards.push_back(reinterpret_cast<const float*>(gathered.data()) + size_t(m) * sharding->shard_size);
    }
    std::vector<float> rebuilt;
    sharding->append_whole(mine.data(), shards, rebuilt);
    EXPECT_TRUE(bits_equal(rebuilt, whole.parameters().values()));
  }
}

TEST(MultiTaskExpertParallelRefusal, ExpertsPerLevelMustDivide) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  strata::comm::ParallelGroups groups(MPI_COMM_WORLD, strata::ParallelLayout{1, 1, size});
  strata::comm::MpiExpertGroup group(groups);
  MultiTask model(options_of(Case{"ple", 1, 1, 1, 2}), 3, 3, 2, 5);  // 3 experts per level
  try {
    model.set_expert_group(&group);
    ADD_FAILURE() << "3 experts per level split over " << size;
  } catch (const strata::Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("layout.ep = " + std::to_string(size)), std::string::npos) << text;
    EXPECT_NE(text.find("model.task_experts"), std::string::npos) << text;
  }
}

}  // namespace
