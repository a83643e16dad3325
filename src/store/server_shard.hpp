// ServerShard: the rows one parameter server owns (the L3 tier in Scheme B, the
// only store in Scheme A). Creates rows on first training pull, answers
// read-only pulls for evaluation without creating rows, and applies the sparse
// optimizer once per step to the gradients summed over trainers in rank order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/optimizers.hpp"
#include "store/gradient_accumulator.hpp"
#include "store/row_table.hpp"

namespace strata::store {

struct ServerShardOptions {
  int dim = 16;
  uint64_t seed = 1;           // row initialisation seed (train.seed)
  float row_init_scale = 0.05f;
};

class ServerShard {
 public:
  ServerShard(const ServerShardOptions& options, std::unique_ptr<model::SparseOptimizer> optimizer);

  // Training pull: writes values (n, dim) of the rows, creating missing ones, and
  // remembers the slots as `trainer`'s rows of this step for the push.
  void pull_for_training(int trainer, const uint32_t* tables, const uint64_t* keys, size_t n, float* values);
  // Read-only pull: missing rows are answered with their initial values, not stored.
  void pull_read_only(const uint32_t* tables, const uint64_t* keys, size_t n, float* values) const;
  // Gradients (n, dim) of `trainer`'s rows of this step, in its pull order.
  void add_gradients(int trainer, const float* grads, size_t n);
  // Applies the optimizer to every row touched this step; gradients were added
  // trainer by trainer, so sums are in rank order, then sample order.
  void apply_step();

  // Tiered mode: full rows (values + optimizer state) for a producer's L2. A
  // new row is answered with its initial values but not stored: it is stored
  // when it comes back dirty, i.e. once a step has used it, which is exactly
  // when a training pull in ps mode would have created it.
  void fetch_full(const RowId* ids, size_t n, float* rows) const;
  // Tiered mode: rows written back from L2, newer than what the shard holds.
  void store_full(const RowId* ids, size_t n, const float* rows);
  // Resume: rows (n, width) with their access counts, from a checkpoint.
  void restore_rows(const RowId* ids, size_t n, const float* rows, const uint64_t* counts);

  const RowTable& rows() const { return table_; }
  RowTable& rows() { return table_; }
  int dim() const { return options_.dim; }

 private:
  ServerShardOptions options_;
  std::unique_ptr<model::SparseOptimizer> optimizer_;
  RowTable table_;
  std::vector<std::vector<int64_t>> pulled_slots_;  // per trainer: slots of this step's pull
  GradientAccumulator gradients_;
  std::vector<uint8_t> created_;  // pull_for_training: which rows were new

  int64_t slot_for_training(uint32_t table, uint64_t key);
};

}  // namespace strata::store
