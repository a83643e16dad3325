// RowTable: a hash table of embedding rows with no fixed vocabulary. Each row is
// [values (dim) | optimizer state (state_width)] plus its id and an access count.
// Rows live in fixed-size chunks so that they never move once created (growing
// costs no copy, and no vector doubles its capacity); the index is open
// addressing with linear probing at load <= 3/4, and each bucket holds the key
// itself so that a probe touches one cache line, not the row's id too. What a
// row costs beside its payload: 24 bytes (id, count) and 21-43 of index, so a
// row of 16 values + 16 optimizer floats (128 bytes) takes about 180.
#pragma once

#include <cstdint>
#include <memory>
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
  // find_or_insert for n keys at once, prefetching buckets ahead of the probes:
  // slots[i] for (tables[i], keys[i]); created[i] = 1 where the row is new.
  void find_or_insert_many(const uint32_t* tables, const uint64_t* keys, size_t n, int64_t* slots,
                           uint8_t* created);

  float* row(int64_t slot) { return chunks_[slot >> kChunkBits].get() + (slot & kChunkMask) * width_; }
  const float* row(int64_t slot) const { return chunks_[slot >> kChunkBits].get() + (slot & kChunkMask) * width_; }
  // Prefetch hint for a row that is about to be read or written.
  void prefetch_row(int64_t slot) const;
  uint64_t& access_count(int64_t slot) { return count_chunks_[slot >> kChunkBits][slot & kChunkMask]; }
  uint64_t access_count(int64_t slot) const { return count_chunks_[slot >> kChunkBits][slot & kChunkMask]; }
  RowId id(int64_t slot) const { return id_chunks_[slot >> kChunkBits][slot & kChunkMask]; }

  // Slots in (table, key) order: the canonical order of digests and checkpoints.
  std::vector<int64_t> sorted_slots() const;
  size_t memory_bytes() const;

 private:
  static constexpr int kChunkBits = 12;  // 4096 rows per chunk
  static constexpr int64_t kChunkMask = (int64_t(1) << kChunkBits) - 1;
  static constexpr uint32_t kEmpty = UINT32_MAX;

  struct Bucket {
    uint64_t key = 0;
    uint32_t table = 0;
    uint32_t slot = kEmpty;
  };

  size_t bucket_of(uint32_t table, uint64_t key) const;
  int64_t insert_at(size_t bucket, uint32_t table, uint64_t key);
  void grow_index();

  int dim_;
  int width_;
  size_t count_ = 0;
  std::vector<std::unique_ptr<float[]>> chunks_;           // each (4096, width)
  std::vector<std::unique_ptr<RowId[]>> id_chunks_;        // each (4096)
  std::vector<std::unique_ptr<uint64_t[]>> count_chunks_;  // each (4096)
  std::vector<Bucket> index_;
  std::vector<size_t> scratch_buckets_;  // find_or_insert_many's precomputed buckets
  size_t mask_ = 0;
};

}  // namespace strata::store
