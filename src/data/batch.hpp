// Batch: what a producer hands a trainer for one step. Dense features are already
// transformed; categorical features are hashed keys, de-duplicated per table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::data {

// The keys of one table for every sample of a batch, as CSR bags.
struct SparseBags {
  std::vector<int32_t> offsets;      // (B + 1) bag b holds keys [offsets[b], offsets[b+1])
  std::vector<uint64_t> keys;        // (nnz) hashed keys in bag order; cleared by deduplicate()
  std::vector<uint64_t> unique_keys; // (U) sorted ascending, filled by deduplicate()
  std::vector<int32_t> index;        // (nnz) position of each key in unique_keys
  // Tied tables (one row per key for two of a batch's tables, e.g. an item's input
  // and output row): -1, or a lower table s whose unique_keys this table's index
  // points into; its own unique_keys is then empty. Set by deduplicate().
  int32_t keys_of = -1;
};

struct Batch {
  int64_t first_sample = 0;          // global index of the first sample (synthetic) or -1
  int32_t size = 0;                  // B, samples in this batch
  int32_t num_dense = 0;
  int32_t num_tasks = 1;             // labels per sample (multi-task data: one per task)
  std::vector<float> labels;         // (B, num_tasks) sample-major, 0 or 1
  std::vector<float> dense;          // (B, num_dense) log(1 + max(x, 0))
  std::vector<SparseBags> tables;    // (num_tables)

  void reset(int32_t num_dense_features, int32_t num_tables, int32_t tasks = 1);
};

// Sorts and de-duplicates every table's keys: fills unique_keys and index, clears keys.
void deduplicate(Batch& batch);
// The same with tied tables: keys_of[t] = -1 (table t de-duplicated on its own) or a
// table s < t with keys_of[s] = -1, whose unique_keys then hold the union of both
// tables' keys (table s's index first, then t's point into them). Empty keys_of:
// every table on its own. strata::Error for an inconsistent keys_of.
void deduplicate(Batch& batch, const std::vector<int32_t>& keys_of);

// The table whose unique_keys (and so whose rows) table t's index refers to.
inline int keys_table(const Batch& batch, int t) {
  const int32_t s = batch.tables[size_t(t)].keys_of;
  return s >= 0 ? s : t;
}

// Wire format between producer and trainer (only the de-duplicated form travels).
// serialize(batch, out) appends to out; deserialize(..., batch) reuses batch's capacity.
void serialize(const Batch& batch, std::vector<char>& out);
std::vector<char> serialize(const Batch& batch);
void deserialize(const char* bytes, size_t size, Batch& batch);
Batch deserialize(const char* bytes, size_t size);

}  // namespace strata::data
