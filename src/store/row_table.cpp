#include "store/row_table.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/error.hpp"

namespace strata::store {

RowTable::RowTable(int dim, int state_width) : dim_(dim), width_(dim + state_width) {
  index_.assign(1024, Bucket{});
  mask_ = index_.size() - 1;
}

size_t RowTable::bucket_of(uint32_t table, uint64_t key) const {
  return static_cast<size_t>(mix64(key ^ 0x7f4a7c15ULL, table)) & mask_;
}

void RowTable::prefetch_row(int64_t slot) const {
  const char* p = reinterpret_cast<const char*>(row(slot));
  for (int offset = 0; offset < width_ * int(sizeof(float)); offset += 64) __builtin_prefetch(p + offset, 1, 3);
}

int64_t RowTable::find(uint32_t table, uint64_t key) const {
  for (size_t b = bucket_of(table, key);; b = (b + 1) & mask_) {
    const Bucket& bucket = index_[b];
    if (bucket.slot == kEmpty) return -1;
    if (bucket.key == key && bucket.table == table) return bucket.slot;
  }
}

int64_t RowTable::insert_at(size_t b, uint32_t table, uint64_t key) {
  if (count_ >= kEmpty) {
    throw Error("a server shard holds 2^32 - 1 rows, its limit", "add servers ([layout] servers) to spread the rows");
  }
  const int64_t slot = static_cast<int64_t>(count_++);
  index_[b] = Bucket{key, table, static_cast<uint32_t>(slot)};
  if ((slot >> kChunkBits) >= static_cast<int64_t>(chunks_.size())) {
    const size_t rows = size_t(1) << kChunkBits;
    chunks_.emplace_back(new float[rows * width_]);
    id_chunks_.emplace_back(new RowId[rows]);
    count_chunks_.emplace_back(new uint64_t[rows]);
  }
  std::memset(row(slot), 0, sizeof(float) * width_);
  id_chunks_[slot >> kChunkBits][slot & kChunkMask] = RowId{table, key};
  access_count(slot) = 0;
  return slot;
}

int64_t RowTable::find_or_insert(uint32_t table, uint64_t key, bool* created) {
  if ((count_ + 1) * 4 > index_.size() * 3) grow_index();  // load factor <= 3/4
  size_t b = bucket_of(table, key);
  for (;; b = (b + 1) & mask_) {
    const Bucket& bucket = index_[b];
    if (bucket.slot == kEmpty) break;
    if (bucket.key == key && bucket.table == table) {
      if (created) *created = false;
      return bucket.slot;
    }
  }
  if (created) *created = true;
  return insert_at(b, table, key);
}

void RowTable::find_or_insert_many(const uint32_t* tables, const uint64_t* keys, size_t n, int64_t* slots,
                                   uint8_t* created) {
  // Growing first keeps the buckets (and so the prefetched addresses) fixed below.
  while ((count_ + n) * 4 > index_.size() * 3) grow_index();
  constexpr size_t kAhead = 12;
  std::vector<size_t>& buckets = scratch_buckets_;
  buckets.resize(n);
  for (size_t i = 0; i < n; ++i) buckets[i] = bucket_of(tables[i], keys[i]);
  for (size_t i = 0; i < std::min(n, kAhead); ++i) __builtin_prefetch(&index_[buckets[i]], 0, 3);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&index_[buckets[i + kAhead]], 0, 3);
    const uint32_t table = tables[i];
    const uint64_t key = keys[i];
    size_t b = buckets[i];
    int64_t slot = -1;
    for (;; b = (b + 1) & mask_) {
      const Bucket& bucket = index_[b];
      if (bucket.slot == kEmpty) break;
      if (bucket.key == key && bucket.table == table) {
        slot = bucket.slot;
        break;
      }
    }
    created[i] = slot < 0;
    slots[i] = slot < 0 ? insert_at(b, table, key) : slot;
  }
}

void RowTable::grow_index() {
  std::vector<Bucket> old = std::move(index_);
  index_.assign(old.size() * 2, Bucket{});
  mask_ = index_.size() - 1;
  for (const Bucket& bucket : old) {
    if (bucket.slot == kEmpty) continue;
    size_t b = bucket_of(bucket.table, bucket.key);
    while (index_[b].slot != kEmpty) b = (b + 1) & mask_;
    index_[b] = bucket;
  }
}

std::vector<int64_t> RowTable::sorted_slots() const {
  std::vector<int64_t> slots(count_);
  std::iota(slots.begin(), slots.end(), 0);
  std::sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return id(a) < id(b); });
  return slots;
}

size_t RowTable::memory_bytes() const {
  return chunks_.size() * (size_t(1) << kChunkBits) * (width_ * sizeof(float) + sizeof(RowId) + sizeof(uint64_t)) +
         index_.capacity() * sizeof(Bucket);
}

}  // namespace strata::store
