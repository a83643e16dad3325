#include "store/row_table.hpp"

#include <algorithm>
#include <numeric>

namespace strata::store {

RowTable::RowTable(int dim, int state_width) : dim_(dim), width_(dim + state_width) {
  index_.assign(1024, -1);
  mask_ = index_.size() - 1;
}

size_t RowTable::bucket_of(uint32_t table, uint64_t key) const {
  return static_cast<size_t>(mix64(key ^ 0x7f4a7c15ULL, table)) & mask_;
}

int64_t RowTable::find(uint32_t table, uint64_t key) const {
  for (size_t b = bucket_of(table, key);; b = (b + 1) & mask_) {
    int64_t slot = index_[b];
    if (slot < 0) return -1;
    const RowId& id = ids_[slot];
    if (id.key == key && id.table == table) return slot;
  }
}

int64_t RowTable::find_or_insert(uint32_t table, uint64_t key, bool* created) {
  if ((count_ + 1) * 2 > index_.size()) grow_index();  // load factor <= 0.5
  size_t b = bucket_of(table, key);
  for (;; b = (b + 1) & mask_) {
    int64_t slot = index_[b];
    if (slot < 0) break;
    const RowId& id = ids_[slot];
    if (id.key == key && id.table == table) {
      if (created) *created = false;
      return slot;
    }
  }
  int64_t slot = static_cast<int64_t>(count_++);
  index_[b] = slot;
  ids_.push_back({table, key});
  counts_.push_back(0);
  arena_.resize(count_ * static_cast<size_t>(width_), 0.0f);
  if (created) *created = true;
  return slot;
}

void RowTable::grow_index() {
  index_.assign(index_.size() * 2, -1);
  mask_ = index_.size() - 1;
  for (size_t slot = 0; slot < count_; ++slot) {
    size_t b = bucket_of(ids_[slot].table, ids_[slot].key);
    while (index_[b] >= 0) b = (b + 1) & mask_;
    index_[b] = static_cast<int64_t>(slot);
  }
}

std::vector<int64_t> RowTable::sorted_slots() const {
  std::vector<int64_t> slots(count_);
  std::iota(slots.begin(), slots.end(), 0);
  std::sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return ids_[a] < ids_[b]; });
  return slots;
}

size_t RowTable::memory_bytes() const {
  return arena_.capacity() * sizeof(float) + counts_.capacity() * sizeof(uint64_t) +
         ids_.capacity() * sizeof(RowId) + index_.capacity() * sizeof(int64_t);
}

}  // namespace strata::store
