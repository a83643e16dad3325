#include "store/l1_directory.hpp"

#include "common/error.hpp"

namespace strata::store {

L1Directory::L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy)
    : owner_(owner), capacity_(capacity_rows), row_bytes_(row_bytes), policy_(policy), queue_(policy) {}

void L1Directory::add_round(int64_t round, std::vector<RowId> rows) {
  for (const RowId& id : rows) {
    future_[id].push_back(round);
    auto it = present_.find(id);
    if (it != present_.end() && it->second.pins == 0 && it->second.usage.next_use == INT64_MAX) {
      it->second.usage.next_use = round;  // a use just became known
      queue_.update(slot_of_.at(id), it->second.usage);
    }
  }
  rounds_.emplace_back(round, std::move(rows));
}

int64_t L1Directory::next_use_after(const RowId& id, int64_t round) const {
  auto it = future_.find(id);
  if (it == future_.end()) return INT64_MAX;
  for (int64_t r : it->second) {
    if (r > round) return r;
  }
  return INT64_MAX;
}

void L1Directory::pin_round(int64_t round) {
  for (const auto& [r, rows] : rounds_) {
    if (r != round) continue;
    for (const RowId& id : rows) {
      if (++pins_[id] != 1) continue;
      auto it = present_.find(id);
      if (it != present_.end()) queue_.erase(slot_of_.at(id));
    }
  }
}

void L1Directory::unpin_round(int64_t round) {
  for (const auto& [r, rows] : rounds_) {
    if (r != round) continue;
    for (const RowId& id : rows) {
      auto pin = pins_.find(id);
      if (--pin->second > 0) continue;
      pins_.erase(pin);
      auto it = present_.find(id);
      if (it == present_.end()) continue;
      it->second.pins = 0;
      it->second.usage.next_use = next_use_after(id, round);
      queue_.update(slot_of_.at(id), it->second.usage);
    }
  }
}

StagingPlan L1Directory::plan(int64_t round, int depth) {
  // Retire rounds before this one: their rows leave the window and the horizon.
  while (!rounds_.empty() && rounds_.front().first < round) {
    const int64_t old = rounds_.front().first;
    if (old <= pinned_through_) unpin_round(old);
    for (const RowId& id : rounds_.front().second) {
      auto it = future_.find(id);
      if (it == future_.end()) continue;
      while (!it->second.empty() && it->second.front() <= old) it->second.pop_front();
      if (it->second.empty()) future_.erase(it);
    }
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
  // Pinned rows keep their place; note the pins on present rows.
  for (auto& [id, count] : pins_) {
    auto it = present_.find(id);
    if (it != present_.end()) it->second.pins = count;
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
  for (const RowId& id : rounds_.front().second) {
    auto it = present_.find(id);
    if (it != present_.end()) {
      policy_.record_access(it->second.usage, round);
      ++plan.hits;
      continue;
    }
    if (size() >= capacity_) {
      const int64_t victim = queue_.peek_victim();
      if (victim < 0) throw Error("L1Directory: no evictable row although the window fits (bug)");
      const RowId victim_id = id_of_slot_.at(victim);
      queue_.erase(victim);
      id_of_slot_.erase(victim);
      slot_of_.erase(victim_id);
      present_.erase(victim_id);
      plan.evict.push_back(victim_id);
    }
    const int64_t slot = next_slot_++;
    Entry entry;
    entry.pins = pins_.count(id) ? pins_.at(id) : 0;
    policy_.record_access(entry.usage, round);
    entry.usage.next_use = next_use_after(id, round);
    present_.emplace(id, entry);
    slot_of_.emplace(id, slot);
    id_of_slot_.emplace(slot, id);
    if (entry.pins == 0) queue_.update(slot, entry.usage);
    plan.insert.push_back(id);
  }
  return plan;
}

}  // namespace strata::store
