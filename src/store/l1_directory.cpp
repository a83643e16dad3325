#include "store/l1_directory.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace strata::store {

L1Directory::L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy,
                         const AccessHistory* history)
    : owner_(owner),
      capacity_(capacity_rows),
      row_bytes_(row_bytes),
      policy_(policy),
      history_(history),
      queue_(policy),
      index_(static_cast<size_t>(std::min<int64_t>(capacity_rows, 4096))) {}

int32_t L1Directory::entry_index(const RowId& id) {
  bool inserted = false;
  int32_t& index = index_.insert(id, -1, &inserted);
  if (inserted) {
    if (free_entries_.empty()) {
      index = static_cast<int32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      index = free_entries_.back();
      free_entries_.pop_back();
      entries_[index] = Entry{};
    }
    entries_[index].id = id;
  }
  return index;
}

// An entry that is not present, not pinned and not used in the horizon is forgotten.
void L1Directory::release_if_unused(int32_t index) {
  const Entry& e = entries_[index];
  if (e.slot >= 0 || e.pins > 0 || !e.future.empty()) return;
  index_.erase(e.id);
  free_entries_.push_back(index);
}

const std::vector<int32_t>& L1Directory::entries_of(int64_t round) const {
  const int64_t at = rounds_.empty() ? -1 : round - rounds_.front().first;
  if (at < 0 || at >= static_cast<int64_t>(rounds_.size())) {
    throw Error("L1Directory: round " + std::to_string(round) + " is not known (bug)");
  }
  return rounds_[at].second;
}

int64_t L1Directory::next_use(const RowId& id) const {
  const int32_t* index = index_.find(id);
  if (!index || rounds_.empty()) return INT64_MAX;
  return next_use_after(entries_[*index], rounds_.front().first - 1);
}

void L1Directory::add_round(int64_t round, std::vector<RowId> rows, std::vector<RowId>* absent) {
  if (!rounds_.empty() && round != rounds_.back().first + 1) {
    throw Error("L1Directory: round " + std::to_string(round) + " added out of order (bug)");
  }
  if (!rounds_.empty() && round - rounds_.front().first >= kMaxKnownRounds) {
    throw Error("the look-ahead horizon spans more than " + std::to_string(kMaxKnownRounds) + " rounds",
                "keep store.prefetch_depth + store.horizon below " + std::to_string(kMaxKnownRounds - 2));
  }
  // Resolved to entry indices once: an entry with a future use is never
  // released, so the indices stay valid until the round retires.
  std::vector<int32_t> indices(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    indices[i] = entry_index(rows[i]);
    Entry& e = entries_[indices[i]];
    if (absent && e.slot < 0) absent->push_back(rows[i]);
    const bool had_no_future = e.future.empty();
    e.future.set(round);
    if (e.slot >= 0 && e.pins == 0 && had_no_future) {
      e.usage.next_use = round;  // a use just became known
      queue_.update(e.slot, e.usage);
    }
  }
  rounds_.emplace_back(round, std::move(indices));
}

// Every set bit of the mask is a known round in (round, round + 256): retired
// rounds' bits are cleared before this is asked.
int64_t L1Directory::next_use_after(const Entry& e, int64_t round) const { return e.future.next_after(round); }

void L1Directory::pin_round(int64_t round) {
  for (int32_t index : entries_of(round)) {
    Entry& e = entries_[index];
    if (++e.pins != 1) continue;
    ++pinned_;
    if (e.slot >= 0) queue_.erase(e.slot);
  }
}

void L1Directory::unpin_round(int64_t round) {
  for (int32_t index : entries_of(round)) {
    Entry& e = entries_[index];
    if (--e.pins > 0) continue;
    --pinned_;
    if (e.slot < 0) continue;
    e.usage.next_use = next_use_after(e, round);
    queue_.update(e.slot, e.usage);
  }
}

void L1Directory::evict_slot(int64_t victim_slot, StagingPlan& plan) {
  queue_.erase(victim_slot);
  const int32_t victim = entry_of_slot_[victim_slot];
  entry_of_slot_[victim_slot] = -1;
  free_slots_.push_back(static_cast<int32_t>(victim_slot));
  entries_[victim].slot = -1;
  --present_;
  plan.evict.push_back(entries_[victim].id);
  release_if_unused(victim);
}

StagingPlan L1Directory::plan(int64_t round, int depth) {
  // Retire rounds before this one: their rows leave the window and the horizon.
  while (!rounds_.empty() && rounds_.front().first < round) {
    const int64_t old = rounds_.front().first;
    for (int32_t index : rounds_.front().second) entries_[index].future.clear(old);
    if (old <= pinned_through_) unpin_round(old);
    for (int32_t index : rounds_.front().second) release_if_unused(index);
    rounds_.pop_front();
  }
  if (rounds_.empty() || rounds_.front().first != round) {
    throw Error("L1Directory::plan(" + std::to_string(round) + ") before the round was added (bug)");
  }
  for (const auto& [r, rows] : rounds_) {
    if (r > pinned_through_ && r <= round + depth) {
      pin_round(r);
      pinned_through_ = r;
    }
  }

  // The window's working set must fit whatever the policy would do: a budget
  // below it is refused with the number to use, never left to chance.
  if (window_rows() > capacity_) {
    throw Error("the L1 tier of trainer " + std::to_string(owner_) + " holds " + std::to_string(capacity_) +
                    " rows but the prefetch window [" + std::to_string(round) + ", " +
                    std::to_string(round + depth) + "] needs " + std::to_string(window_rows()) + " distinct rows",
                "raise store.l1_mb to at least " +
                    std::to_string(double(window_rows()) * row_bytes_ / 1048576.0) + " (" +
                    std::to_string(window_rows()) + " rows of " + std::to_string(row_bytes_) +
                    " bytes), or lower store.prefetch_depth or train.batch_size");
  }
  StagingPlan plan;
  plan.round = round;
  // A budget that shrank (online controller): evict down to it first.
  while (size() > capacity_) {
    const int64_t victim_slot = queue_.peek_victim();
    if (victim_slot < 0) break;
    evict_slot(victim_slot, plan);
  }
  for (int32_t index : rounds_.front().second) {
    if (entries_[index].slot >= 0) {
      policy_.record_access(entries_[index].usage, round);
      ++plan.hits;
      continue;
    }
    if (size() >= capacity_) {
      const int64_t victim_slot = queue_.peek_victim();
      if (victim_slot < 0) throw Error("L1Directory: no evictable row although the window fits (bug)");
      evict_slot(victim_slot, plan);
    }
    Entry& e = entries_[index];  // entries_ does not grow in this loop
    if (!free_slots_.empty()) {
      e.slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      e.slot = static_cast<int32_t>(entry_of_slot_.size());  // a slot never used before
      entry_of_slot_.push_back(-1);
    }
    entry_of_slot_[e.slot] = index;
    ++present_;
    e.usage = RowUsage{};
    if (history_) policy_.admit(e.usage, history_->frequency(e.id.table, e.id.key));
    policy_.record_access(e.usage, round);
    e.usage.next_use = next_use_after(e, round);
    if (e.pins == 0) queue_.update(e.slot, e.usage);
    plan.insert.push_back(e.id);
  }
  return plan;
}

}  // namespace strata::store
