#include "store/server_shard.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "store/row_init.hpp"

namespace strata::store {

ServerShard::ServerShard(const ServerShardOptions& options, std::unique_ptr<model::SparseOptimizer> optimizer)
    : options_(options),
      optimizer_(std::move(optimizer)),
      table_(options.dim, optimizer_->state_width(options.dim)),
      gradients_(options.dim) {}

void ServerShard::pull_for_training(int trainer, const uint32_t* tables, const uint64_t* keys, size_t n,
                                    float* values) {
  if (static_cast<size_t>(trainer) >= pulled_slots_.size()) pulled_slots_.resize(trainer + 1);
  auto& slots = pulled_slots_[trainer];
  slots.resize(n);
  created_.resize(n);
  table_.find_or_insert_many(tables, keys, n, slots.data(), created_.data());
  const int dim = options_.dim;
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < std::min(n, kAhead); ++i) table_.prefetch_row(slots[i]);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) table_.prefetch_row(slots[i + kAhead]);
    float* row = table_.row(slots[i]);
    if (created_[i]) {
      init_row_values(tables[i], keys[i], options_.seed, options_.row_init_scale, row, dim);
      optimizer_->init_state(row + dim, dim);
    }
    table_.access_count(slots[i]) += 1;
    std::memcpy(values + i * dim, row, sizeof(float) * dim);
  }
}

int64_t ServerShard::slot_for_training(uint32_t table, uint64_t key) {
  bool created = false;
  const int64_t slot = table_.find_or_insert(table, key, &created);
  if (created) {
    float* row = table_.row(slot);
    init_row_values(table, key, options_.seed, options_.row_init_scale, row, options_.dim);
    optimizer_->init_state(row + options_.dim, options_.dim);
  }
  table_.access_count(slot) += 1;
  return slot;
}

void ServerShard::fetch_full(const RowId* ids, size_t n, float* rows) const {
  const int width = table_.width();
  const int dim = options_.dim;
  for (size_t i = 0; i < n; ++i) {
    const int64_t slot = table_.find(ids[i].table, ids[i].key);
    float* out = rows + i * width;
    if (slot >= 0) {
      std::memcpy(out, table_.row(slot), sizeof(float) * width);
    } else {
      init_row_values(ids[i].table, ids[i].key, options_.seed, options_.row_init_scale, out, dim);
      optimizer_->init_state(out + dim, dim);
    }
  }
}

void ServerShard::store_full(const RowId* ids, size_t n, const float* rows) {
  const int width = table_.width();
  for (size_t i = 0; i < n; ++i) {
    const int64_t slot = table_.find_or_insert(ids[i].table, ids[i].key, nullptr);
    std::memcpy(table_.row(slot), rows + i * width, sizeof(float) * width);
  }
}

void ServerShard::restore_rows(const RowId* ids, size_t n, const float* rows, const uint64_t* counts) {
  const int width = table_.width();
  for (size_t i = 0; i < n; ++i) {
    const int64_t slot = table_.find_or_insert(ids[i].table, ids[i].key, nullptr);
    std::memcpy(table_.row(slot), rows + i * width, sizeof(float) * width);
    table_.access_count(slot) = counts[i];
  }
}

void ServerShard::pull_read_only(const uint32_t* tables, const uint64_t* keys, size_t n, float* values) const {
  const int dim = options_.dim;
  for (size_t i = 0; i < n; ++i) {
    int64_t slot = table_.find(tables[i], keys[i]);
    if (slot >= 0) {
      std::memcpy(values + i * dim, table_.row(slot), sizeof(float) * dim);
    } else {
      init_row_values(tables[i], keys[i], options_.seed, options_.row_init_scale, values + i * dim, dim);
    }
  }
}

void ServerShard::add_gradients(int trainer, const float* grads, size_t n) {
  if (static_cast<size_t>(trainer) >= pulled_slots_.size() || pulled_slots_[trainer].size() != n) {
    throw Error("trainer " + std::to_string(trainer) + " pushed " + std::to_string(n) +
                    " row gradients but pulled a different number of rows this step",
                "this is a protocol bug; run every rank from the same build");
  }
  const int dim = options_.dim;
  const auto& slots = pulled_slots_[trainer];
  for (size_t i = 0; i < n; ++i) gradients_.add(slots[i], grads + i * dim);
}

void ServerShard::apply_step() {
  const int dim = options_.dim;
  gradients_.drain([&](int64_t slot, const float* grad) {
    float* row = table_.row(slot);
    optimizer_->apply(row, row + dim, grad, dim);
  }, [&](int64_t slot) { table_.prefetch_row(slot); });
  for (auto& slots : pulled_slots_) slots.clear();
}

}  // namespace strata::store
