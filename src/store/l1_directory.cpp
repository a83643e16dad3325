#include "store/l1_directory.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace strata::store {
namespace {
constexpr size_t kAhead = 8;  // entries in flight in each pass
}  // namespace

void StagingPlan::clear() {
  evict.clear(), evict_slots.clear(), evict_next_use.clear();
  insert.clear(), insert_slots.clear();
  serve_offsets.clear(), serve_slots.clear();
  hits = 0;
}

L1Directory::L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy,
                         AccessHistory* history)
    : owner_(owner),
      capacity_(capacity_rows),
      row_bytes_(row_bytes),
      policy_(policy),
      history_(history),
      queue_(policy),
      index_(static_cast<size_t>(std::min<int64_t>(capacity_rows, 4096))) {
  // Per-slot bookkeeping sized for the budget at once (it never overshoots it).
  const size_t slots = static_cast<size_t>(std::max<int64_t>(capacity_rows, 0));
  queue_.reserve(capacity_rows);
  entry_of_slot_.reserve(slots);
  usage_.reserve(slots);
  free_slots_.reserve(slots);
}

size_t L1Directory::memory_bytes() const {
  size_t bytes = EvictionQueue::bytes_for(static_cast<int64_t>(entry_of_slot_.capacity())) + index_.memory_bytes() +
                 entries_.capacity() * sizeof(Entry) +
                 (free_entries_.capacity() + evicted_entries_.capacity() + to_insert_.capacity() + victims_.capacity()) * sizeof(int32_t) +
                 entry_of_slot_.capacity() * sizeof(int32_t) + usage_.capacity() * sizeof(RowUsage) +
                 free_slots_.capacity() * sizeof(int32_t);
  auto round_bytes = [](const KnownRound& r) {
    return (r.distinct.capacity() + r.requests.capacity() + r.offsets.capacity()) * sizeof(int32_t);
  };
  for (const KnownRound& r : rounds_) bytes += round_bytes(r);
  for (const KnownRound& r : spare_rounds_) bytes += round_bytes(r);
  return bytes;
}

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

int64_t L1Directory::next_use(const RowId& id) const {
  const int32_t* index = index_.find(id);
  if (!index || rounds_.empty()) return INT64_MAX;
  return entries_[*index].future.next_after(rounds_.front().round - 1);
}

void L1Directory::add_round(int64_t round, const std::vector<RowId>& rows, std::vector<RowId>* absent) {
  OwnerRequests requests;
  requests.ids = rows;
  requests.offsets = {0, static_cast<int32_t>(rows.size())};
  add_round(round, requests, absent);
}

void L1Directory::add_round(int64_t round, const OwnerRequests& requests, std::vector<RowId>* absent,
                            std::vector<RowId>* distinct) {
  if (!rounds_.empty() && round != rounds_.back().round + 1) {
    throw Error("L1Directory: round " + std::to_string(round) + " added out of order (bug)");
  }
  if (!rounds_.empty() && round - rounds_.front().round >= kMaxKnownRounds) {
    throw Error("the look-ahead horizon spans more than " + std::to_string(kMaxKnownRounds) + " rounds",
                "keep store.prefetch_depth + store.horizon below " + std::to_string(kMaxKnownRounds - 2));
  }
  if (spare_rounds_.empty()) spare_rounds_.emplace_back();
  rounds_.push_back(std::move(spare_rounds_.back()));
  spare_rounds_.pop_back();
  KnownRound& known = rounds_.back();
  known.round = round;
  known.distinct.clear();
  known.offsets = requests.offsets;
  const std::vector<RowId>& ids = requests.ids;
  const size_t n = ids.size();
  known.requests.resize(n);
  // Pass 1: every request to its entry (an entry with a future use is never
  // released, so the indices stay valid until the round retires).
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) index_.prefetch(ids[i + kAhead]);
    known.requests[i] = entry_index(ids[i]);
  }
  // Pass 2: the round's distinct rows learn this use.
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      prefetch_entry(known.requests[i + kAhead]);
      if (history_) history_->prefetch(ids[i + kAhead].table, ids[i + kAhead].key);
    }
    // Second stage (the entry loaded by now): the usage and queue state of a
    // present, unpinned row that is about to learn its first known use.
    if (i + kAhead / 2 < n) {
      const Entry& ahead = entries_[known.requests[i + kAhead / 2]];
      if (ahead.pins == 0 && ahead.future.empty()) prefetch_slot_of(known.requests[i + kAhead / 2], true, true);
    }
    const int32_t index = known.requests[i];
    Entry& e = entries_[index];
    if (e.listed == round) continue;  // asked for by an earlier requester of this round
    e.listed = round;
    known.distinct.push_back(index);
    if (history_) history_->record(e.id.table, e.id.key);
    if (absent && e.slot < 0) absent->push_back(e.id);
    if (distinct) distinct->push_back(e.id);
    const bool had_no_future = e.future.empty();
    e.future.set(round);
    if (e.slot >= 0 && e.pins == 0 && had_no_future) {
      usage_[e.slot].next_use = round;  // a use just became known
      queue_.update(e.slot, usage_[e.slot]);
    }
  }
}

void L1Directory::evict_slot(int32_t victim_slot, StagingPlan& plan) {
  const int32_t victim = entry_of_slot_[victim_slot];
  entry_of_slot_[victim_slot] = -1;
  free_slots_.push_back(victim_slot);
  Entry& e = entries_[victim];
  e.slot = -1;
  --present_;
  plan.evict.push_back(e.id);
  plan.evict_slots.push_back(victim_slot);
  plan.evict_next_use.push_back(usage_[victim_slot].next_use);
  evicted_entries_.push_back(victim);  // released at the end of the plan, their index buckets prefetched
}

void L1Directory::release_evicted() {
  const auto& evicted = evicted_entries_;
  for (size_t i = 0; i < evicted.size(); ++i) {
    if (i + kAhead < evicted.size()) index_.prefetch(entries_[evicted[i + kAhead]].id);
    release_if_unused(evicted[i]);
  }
  evicted_entries_.clear();
}

void L1Directory::plan(int64_t round, int depth, StagingPlan& plan) {
  plan.clear();
  queue_.set_now(round);
  // Retire rounds before this one: their rows leave the window and the horizon.
  while (!rounds_.empty() && rounds_.front().round < round) {
    KnownRound& old = rounds_.front();
    const bool pinned = old.round <= pinned_through_;
    const bool served = old.round <= served_through_;
    const auto& distinct = old.distinct;
    for (size_t i = 0; i < distinct.size(); ++i) {
      if (i + 2 * kAhead < distinct.size()) prefetch_entry(distinct[i + 2 * kAhead]);
      if (i + kAhead < distinct.size()) {
        // A present row records this round's access; one this round unpins re-enters the queue.
        const Entry& ahead = entries_[distinct[i + kAhead]];
        prefetch_slot_of(distinct[i + kAhead], served, pinned && ahead.pins == 1);
        // A row out of L1 that this round no longer pins is likely forgotten: its index bucket.
        if (ahead.slot < 0 && ahead.pins <= 1) index_.prefetch(ahead.id);
      }
      Entry& e = entries_[distinct[i]];
      e.future.clear(old.round);
      // The access of the round it served, recorded now rather than when it
      // was planned: nothing reads a pinned row's usage in between, and this
      // pass touches it anyway.
      if (served && e.slot >= 0) policy_.record_access(usage_[e.slot], old.round);
      if (pinned && --e.pins == 0) {
        --pinned_;
        if (e.slot >= 0) {
          usage_[e.slot].next_use = e.future.next_after(old.round);
          queue_.update(e.slot, usage_[e.slot]);
        }
      }
      release_if_unused(distinct[i]);
    }
    spare_rounds_.push_back(std::move(old));
    rounds_.pop_front();
  }
  if (rounds_.empty() || rounds_.front().round != round) {
    throw Error("L1Directory::plan(" + std::to_string(round) + ") before the round was added (bug)");
  }
  for (const KnownRound& known : rounds_) {
    if (known.round <= pinned_through_) continue;
    if (known.round > round + depth) break;
    const auto& distinct = known.distinct;
    for (size_t i = 0; i < distinct.size(); ++i) {
      if (i + 2 * kAhead < distinct.size()) prefetch_entry(distinct[i + 2 * kAhead]);
      if (i + kAhead < distinct.size()) {
        // Only a row this round pins first leaves the queue.
        const Entry& ahead = entries_[distinct[i + kAhead]];
        if (ahead.pins == 0) prefetch_slot_of(distinct[i + kAhead], false, true);
      }
      Entry& e = entries_[distinct[i]];
      if (++e.pins != 1) continue;
      ++pinned_;
      if (e.slot >= 0) queue_.erase(e.slot);
    }
    pinned_through_ = known.round;
  }

  // The window's working set must fit whatever the policy would do: a budget
  // below it is refused with the number to use, never left to chance.
  if (window_rows() > capacity_) {
    throw InputError("the L1 tier of trainer " + std::to_string(owner_) + " holds " + std::to_string(capacity_) +
                    " rows but the prefetch window [" + std::to_string(round) + ", " +
                    std::to_string(round + depth) + "] needs " + std::to_string(window_rows()) + " distinct rows",
                "raise store.l1_mb to at least " +
                    std::to_string(double(window_rows()) * row_bytes_ / 1048576.0) + " (" +
                    std::to_string(window_rows()) + " rows of " + std::to_string(row_bytes_) +
                    " bytes), or lower store.prefetch_depth or train.batch_size");
  }
  plan.round = round;
  served_through_ = round;
  // Pass 1 over the front round: hits counted, rows to insert listed (their
  // access history prefetched).
  const KnownRound& front = rounds_.front();
  const auto& distinct = front.distinct;
  to_insert_.clear();
  for (size_t i = 0; i < distinct.size(); ++i) {
    if (i + 2 * kAhead < distinct.size()) prefetch_entry(distinct[i + 2 * kAhead]);
    if (i + kAhead < distinct.size()) {
      const Entry& ahead = entries_[distinct[i + kAhead]];
      if (ahead.slot < 0 && history_) history_->prefetch(ahead.id.table, ahead.id.key);
    }
    if (entries_[distinct[i]].slot >= 0) {
      ++plan.hits;  // its access is recorded when the round retires
    } else {
      to_insert_.push_back(distinct[i]);
    }
  }
  // The victims, all taken from the queue first: the rows inserted below are
  // pinned and never enter it, so these are the ones the queue would give one
  // insert at a time, in the same order. Knowing them ahead lets their slot ->
  // entry chains load in parallel instead of one miss after another.
  victims_.clear();
  for (int64_t needed = size() + int64_t(to_insert_.size()) - capacity_; needed > 0; --needed) {
    const int64_t victim_slot = queue_.peek_victim();
    if (victim_slot < 0) break;
    queue_.erase(victim_slot);
    victims_.push_back(static_cast<int32_t>(victim_slot));
  }
  size_t next_victim = 0;
  auto evict_next = [&] {
    if (next_victim == victims_.size()) return false;
    if (next_victim + 2 * kAhead < victims_.size()) __builtin_prefetch(&entry_of_slot_[victims_[next_victim + 2 * kAhead]]);
    if (next_victim + kAhead < victims_.size()) {
      const int32_t slot = victims_[next_victim + kAhead];
      prefetch_entry(entry_of_slot_[slot]);
      __builtin_prefetch(&usage_[slot]);
    }
    evict_slot(victims_[next_victim++], plan);
    return true;
  };
  // A budget that shrank (online controller): evict down to it first.
  while (size() > capacity_ && evict_next()) {
  }
  // Pass 2: the inserts, each taking the slot of the next victim when L1 is full.
  for (const int32_t index : to_insert_) {
    if (size() >= capacity_ && !evict_next()) {
      throw Error("L1Directory: no evictable row although the window fits (bug)");
    }
    Entry& e = entries_[index];  // entries_ does not grow in this loop
    if (!free_slots_.empty()) {
      e.slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      e.slot = static_cast<int32_t>(entry_of_slot_.size());  // a slot never used before
      entry_of_slot_.push_back(-1);
      usage_.emplace_back();
    }
    entry_of_slot_[e.slot] = index;
    ++present_;
    RowUsage& usage = usage_[e.slot];
    usage = RowUsage{};
    if (history_) policy_.admit(usage, history_->frequency(e.id.table, e.id.key));
    // Pinned (the round is in the window): out of the queue until it retires,
    // when its access is recorded and its next use scored.
    plan.insert.push_back(e.id);
    plan.insert_slots.push_back(e.slot);
  }
  release_evicted();
  // Where each requester's rows sit now (all of them present: the round is pinned).
  plan.serve_offsets = front.offsets;
  const auto& requests = front.requests;
  plan.serve_slots.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i + kAhead < requests.size()) prefetch_entry(requests[i + kAhead]);
    plan.serve_slots[i] = entries_[requests[i]].slot;
  }
}

}  // namespace strata::store
