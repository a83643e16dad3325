// RowTable: a hash table of embedding rows with no fixed vocabulary. Each row is
// [values (dim) | optimizer state (state_width)] in one contiguous arena, plus an
// access count. Open addressing with linear probing keeps lookups to one or two
// cache lines; rows are never moved once created (only the arena grows).
#pragma once

#include <cstdint>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

class RowTable {
 public:
  RowTable(int dim, int state_width);

  int dim() const { return dim_; }
  int width() const { return width_; }  // floats per row: dim + state_width
  size_t size() const { return count_; }

  // Row slot of (table, key), or -1 if absent.
  int64_t find(uint32_t table, uint64_t key) const;
  // Row slot of (table, key), inserting a zero-filled row if absent; *created tells which.
  int64_t find_or_insert(uint32_t table, uint64_t key, bool* created);

  float* row(int64_t slot) { return arena_.data() + static_cast<size_t>(slot) * width_; }
  const float* row(int64_t slot) const { return arena_.data() + static_cast<size_t>(slot) * width_; }
  uint64_t& access_count(int64_t slot) { return counts_[slot]; }
  uint64_t access_count(int64_t slot) const { return counts_[slot]; }
  RowId id(int64_t slot) const { return ids_[slot]; }

  // Slots in (table, key) order: the canonical order of digests and checkpoints.
  std::vector<int64_t> sorted_slots() const;
  size_t memory_bytes() const;

 private:
  void grow_index();
  size_t bucket_of(uint32_t table, uint64_t key) const;

  int dim_;
  int width_;
  size_t count_ = 0;
  std::vector<float> arena_;        // (count, width)
  std::vector<uint64_t> counts_;    // (count)
  std::vector<RowId> ids_;          // (count)
  std::vector<int64_t> index_;      // open-addressing buckets: slot or -1
  size_t mask_ = 0;
};

}  // namespace strata::store
