#include "store/eviction_policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "common/error.hpp"

namespace strata::store {
namespace {

class LruPolicy : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  Score score(const RowUsage& u) const override { return {double(u.last_use), u.frequency}; }
};

class LfuPolicy : public EvictionPolicy {
 public:
  const char* name() const override { return "lfu"; }
  Score score(const RowUsage& u) const override { return {u.frequency, double(u.last_use)}; }
};

// Frequency with exponential decay per step. The decayed count is kept in the
// log domain relative to step 0 so that rows updated at different steps compare
// without touching every row each step: log f(now) = log_f - now * log(1/decay).
class LfuDecayPolicy : public EvictionPolicy {
 public:
  explicit LfuDecayPolicy(double decay) : log_decay_(std::log(decay)) {}
  const char* name() const override { return "lfu_decay"; }
  void record_access(RowUsage& u, int64_t step) const override {
    // frequency holds log(count) - last_use * log_decay (a step-0-relative log count).
    const double current = u.accesses == 0 ? -INFINITY : u.frequency + step * log_decay_;
    const double count = std::exp(current) + 1.0;  // decayed count now, plus this access
    u.frequency = std::log(count) - step * log_decay_;
    u.last_use = step;
    u.accesses += 1;
  }
  Score score(const RowUsage& u) const override { return {u.frequency, double(u.last_use)}; }
  // Its frequency is a decayed log count of its own; history does not apply.
  void admit(RowUsage& /*usage*/, double /*history*/) const override {}

 private:
  double log_decay_;
};

// Belady inside the known window: the row used furthest in the future leaves
// first (rows with no known use first of all); ties go to the less frequent.
class LookaheadPolicy : public EvictionPolicy {
 public:
  const char* name() const override { return "lookahead"; }
  Score score(const RowUsage& u) const override {
    const double next = u.next_use == INT64_MAX ? 1e300 : double(u.next_use);
    return {-next, u.frequency};
  }
};

}  // namespace

void EvictionPolicy::record_access(RowUsage& usage, int64_t step) const {
  usage.frequency += 1;
  usage.last_use = step;
  usage.accesses += 1;
}

const std::vector<std::string>& eviction_policy_names() {
  static const std::vector<std::string> names = {"lru", "lfu", "lfu_decay", "lookahead"};
  return names;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name, double decay) {
  if (name == "lru") return std::make_unique<LruPolicy>();
  if (name == "lfu") return std::make_unique<LfuPolicy>();
  if (name == "lfu_decay") {
    if (!(decay > 0 && decay < 1)) throw Error("store.decay must be in (0, 1)", "e.g. store.decay = 0.99");
    return std::make_unique<LfuDecayPolicy>(decay);
  }
  if (name == "lookahead") return std::make_unique<LookaheadPolicy>();
  throw Error("unknown store.policy '" + name + "'", "allowed values: lru, lfu, lfu_decay, lookahead");
}

class EvictionQueue::Order {
 public:
  virtual ~Order() = default;
  virtual void update(int64_t slot, const RowUsage& usage) = 0;
  virtual void erase(int64_t slot) = 0;
  virtual bool contains(int64_t slot) const = 0;
  virtual int64_t peek_victim() = 0;
  virtual size_t size() const = 0;
  virtual void prefetch(int64_t slot) const = 0;
  virtual void set_now(int64_t /*round*/) {}
  virtual void reserve(size_t slots) = 0;
};

namespace {

// A min-heap of (score, slot) with lazy deletion; the slot's version marks its current item.
class ScoredHeap {
 public:
  struct Item {
    EvictionPolicy::Score score;
    int64_t slot;
    uint64_t version;
  };
  // Stale items are dropped once they outnumber the live ones and kSlack.
  static constexpr size_t kSlack = 4096;
  static size_t max_items(size_t live) { return 2 * live + kSlack + 1; }
  void reserve(size_t live) { heap_.reserve(max_items(live)); }
  void push(int64_t slot, EvictionPolicy::Score score, uint64_t version) {
    heap_.push_back(Item{score, slot, version});
    std::push_heap(heap_.begin(), heap_.end(), LeavesLater{});
  }
  template <class IsCurrent>
  int64_t top(IsCurrent&& is_current) {
    while (!heap_.empty() && !is_current(heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), LeavesLater{});
      heap_.pop_back();
    }
    return heap_.empty() ? -1 : heap_.front().slot;
  }
  // Drops every stale item and rebuilds the heap in O(n) once stale ones dominate.
  template <class IsCurrent>
  void compact_if_stale(size_t live, IsCurrent&& is_current) {
    if (heap_.size() <= 2 * live + kSlack) return;
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const Item& item) { return !is_current(item); }),
                heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), LeavesLater{});
  }

 private:
  // std::*_heap build max-heaps: "a leaves later than b" puts the first victim on top.
  struct LeavesLater {
    bool operator()(const Item& a, const Item& b) const {
      if (a.score.primary != b.score.primary) return a.score.primary > b.score.primary;
      if (a.score.secondary != b.score.secondary) return a.score.secondary > b.score.secondary;
      return a.slot > b.slot;
    }
  };
  std::vector<Item> heap_;
};

// The size a per-slot vector grows to for `slot`: doubling, but never past
// what was reserved (a reserved level stays inside its budget).
size_t grown_size(size_t slot, size_t size, size_t reserved) {
  size_t n = std::max<size_t>(slot + 1, size * 2);
  if (reserved > slot) n = std::min(n, reserved);
  return n;
}

void grow_to(size_t slot, std::vector<uint64_t>& version, std::vector<uint8_t>& live) {
  if (slot < live.size()) return;
  const size_t n = grown_size(slot, live.size(), live.capacity());
  live.resize(n, 0);
  version.resize(n, 0);
}

class HeapOrder final : public EvictionQueue::Order {
 public:
  explicit HeapOrder(const EvictionPolicy& policy) : policy_(policy) {}
  // Is a heap item its slot's current one?
  auto current() const {
    return [this](const ScoredHeap::Item& item) { return live_[item.slot] && version_[item.slot] == item.version; };
  }
  void update(int64_t slot, const RowUsage& usage) override {
    grow_to(size_t(slot), version_, live_);
    if (!live_[slot]) live_[slot] = 1, ++live_count_;
    heap_.push(slot, policy_.score(usage), ++version_[slot]);
    heap_.compact_if_stale(live_count_, current());
  }
  void erase(int64_t slot) override {
    if (!contains(slot)) return;
    live_[slot] = 0;
    ++version_[slot];
    --live_count_;
  }
  bool contains(int64_t slot) const override {
    return slot >= 0 && static_cast<size_t>(slot) < live_.size() && live_[slot];
  }
  int64_t peek_victim() override { return heap_.top(current()); }
  size_t size() const override { return live_count_; }
  void reserve(size_t slots) override {
    version_.reserve(slots);
    live_.reserve(slots);
    heap_.reserve(slots);
  }
  static size_t bytes_per_slot() { return sizeof(uint64_t) + sizeof(uint8_t); }
  void prefetch(int64_t slot) const override {
    if (static_cast<size_t>(slot) < live_.size()) __builtin_prefetch(&version_[slot]), __builtin_prefetch(&live_[slot]);
  }

 private:
  const EvictionPolicy& policy_;
  ScoredHeap heap_;
  std::vector<uint64_t> version_;  // slot -> version of its current heap item
  std::vector<uint8_t> live_;      // slot -> evictable now
  size_t live_count_ = 0;
};

// lookahead: see the header. Every list is a vector of (slot, version)
// items with lazy deletion: moving or removing a row bumps its slot's version,
// which turns its old item stale, so an update touches one 8-byte slot state
// and appends to a list (no neighbours to unlink, no heap to sift). Stale items
// are dropped when they surface, and a list is compacted once they dominate.
class LookaheadOrder final : public EvictionQueue::Order {
 public:
  explicit LookaheadOrder(const EvictionPolicy& policy) : policy_(policy) {}

  void update(int64_t slot, const RowUsage& usage) override {
    grow(slot);
    remove(slot);
    SlotState& state = state_[slot];
    if (usage.next_use == INT64_MAX) {
      // No known use: by frequency. Whole counts below kFrequencies have a
      // list each (first in, first out); any other goes to the heap.
      const double f = usage.frequency;
      if (f >= 0 && f < kFrequencies && f == std::floor(f)) {
        add(slot, kFrequency0 + int(f));
      } else {
        state.list = kHeap;
        heap_.push_back(HeapItem{f, int32_t(slot), state.version});
        std::push_heap(heap_.begin(), heap_.end(), LeavesLater{});
        ++live_[kHeap], ++live_count_;
        if (heap_.size() > 2 * live_[kHeap] + kSlack) {
          heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const HeapItem& i) { return !is_current(i); }),
                      heap_.end());
          std::make_heap(heap_.begin(), heap_.end(), LeavesLater{});
        }
      }
      return;
    }
    // Past uses (never in a planned level, but a stale one must not alias a
    // future round of the ring) leave last; uses beyond the ring leave first.
    const int64_t round = std::clamp<int64_t>(usage.next_use, now_ - 1, now_ + kRing);
    add(slot, list_of(round));
  }
  void erase(int64_t slot) override {
    if (contains(slot)) remove(slot);
  }
  bool contains(int64_t slot) const override {
    return slot >= 0 && static_cast<size_t>(slot) < state_.size() && state_[slot].list != kAbsent;
  }
  int64_t peek_victim() override {
    // 1. No known use, least frequent first.
    int64_t victim = -1;
    double victim_frequency = INFINITY;
    if (nonempty_frequency_) {
      const int f = __builtin_ctzll(nonempty_frequency_);
      victim = front(kFrequency0 + f);
      victim_frequency = f;
    }
    if (live_[kHeap] > 0) {
      while (!is_current(heap_.front())) {
        std::pop_heap(heap_.begin(), heap_.end(), LeavesLater{});
        heap_.pop_back();
      }
      if (heap_.front().frequency < victim_frequency) victim = heap_.front().slot;
    }
    if (victim >= 0) return victim;
    // 2. Uses beyond the ring, then the furthest round of the ring with a row.
    if (live_[kFar] > 0) return back(kFar);
    for (int64_t round = now_ + kRing - 1; round >= now_; --round) {
      const int bucket = int(round & (kRing - 1));
      if (!(nonempty_ring_[bucket >> 6] >> (bucket & 63) & 1)) {
        // Skip the rest of an empty 64-bucket word at once.
        if ((nonempty_ring_[bucket >> 6] & ((uint64_t(2) << (bucket & 63)) - 1)) == 0) round -= (bucket & 63);
        continue;
      }
      return back(bucket);
    }
    return live_[kPast] > 0 ? back(kPast) : -1;
  }
  size_t size() const override { return live_count_; }
  void prefetch(int64_t slot) const override {
    if (static_cast<size_t>(slot) < state_.size()) __builtin_prefetch(&state_[slot]);
  }
  void set_now(int64_t round) override {
    // Rows of rounds now left behind move to the past list (normally there are
    // none), most recent first, as they would leave their own round.
    for (int64_t r = now_; r < round && r < now_ + kRing; ++r) {
      const int bucket = int(r & (kRing - 1));
      List& list = lists_[bucket];
      for (size_t i = list.items.size(); i-- > list.head;) {
        const Item item = list.items[i];
        if (!is_current(item)) continue;
        remove(item.slot);
        add(item.slot, kPast);
      }
      list.items.clear(), list.head = 0;
    }
    now_ = std::max(now_, round);
  }
  void reserve(size_t slots) override {
    reserved_ = slots;
    state_.reserve(slots);
    heap_.reserve(heap_items(slots));
  }
  // Per slot: its state, the lists' items (their capacities together never
  // pass item_budget) and the heap's (reserved for twice the slots plus kSlack).
  static size_t bytes_for(size_t slots) {
    return slots * sizeof(SlotState) + item_budget(slots) * sizeof(Item) + heap_items(slots) * sizeof(HeapItem);
  }

 private:
  static constexpr int64_t kRing = 256;
  static constexpr int kFrequencies = 64;
  // Lists: the ring's rounds, uses beyond the ring, past uses, no known use by
  // frequency; then the heap's live count.
  static constexpr int kFar = kRing, kPast = kRing + 1, kFrequency0 = kRing + 2;
  static constexpr int kLists = kFrequency0 + kFrequencies, kHeap = kLists;
  static constexpr int32_t kAbsent = -1;
  static constexpr size_t kSlack = 8;
  struct SlotState {
    int32_t list = kAbsent;  // which list holds its current item
    uint32_t version = 0;    // its current item's version
  };
  struct Item {
    int32_t slot;
    uint32_t version;
  };
  struct HeapItem {
    double frequency;
    int32_t slot;
    uint32_t version;
  };
  // std::*_heap build max-heaps: "a leaves later than b" puts the first victim on top.
  struct LeavesLater {
    bool operator()(const HeapItem& a, const HeapItem& b) const {
      return a.frequency != b.frequency ? a.frequency > b.frequency : a.slot > b.slot;
    }
  };
  static size_t heap_items(size_t slots) { return 2 * slots + kSlack + 1; }
  // The lists' capacities together: a list is compacted once its stale items
  // outnumber its live ones and kSlack, and all are compacted to their size
  // before the next growth would pass this.
  static size_t item_budget(size_t slots) { return 4 * slots + 8192; }
  struct List {
    std::vector<Item> items;
    size_t head = 0;  // items before it are gone (first-in-first-out lists)
  };

  template <class AnyItem>
  bool is_current(const AnyItem& item) const {
    return state_[item.slot].version == item.version;
  }
  void grow(int64_t slot) {
    if (static_cast<size_t>(slot) < state_.size()) return;
    state_.resize(grown_size(size_t(slot), state_.size(), state_.capacity()));
  }
  int list_of(int64_t round) const {
    if (round >= now_ + kRing) return kFar;
    if (round < now_) return kPast;
    return int(round & (kRing - 1));
  }
  void set_nonempty(int list, bool on) {
    uint64_t* word = list < kRing ? &nonempty_ring_[list >> 6] : list >= kFrequency0 ? &nonempty_frequency_ : nullptr;
    if (!word) return;
    const uint64_t bit = uint64_t(1) << ((list < kRing ? list : list - kFrequency0) & 63);
    *word = on ? *word | bit : *word & ~bit;
  }
  void add(int64_t slot, int list) {
    SlotState& state = state_[slot];
    state.list = list;
    List& l = lists_[list];
    if (l.items.size() == l.items.capacity()) {
      // A growth: keep the lists' capacities together inside their budget.
      const size_t budget = item_budget(std::max(reserved_, state_.size()));
      if (item_capacity_ + std::max<size_t>(l.items.capacity(), 1) > budget) compact_all();
      const size_t before = l.items.capacity();
      l.items.push_back(Item{int32_t(slot), state.version});
      item_capacity_ += l.items.capacity() - before;
    } else {
      l.items.push_back(Item{int32_t(slot), state.version});
    }
    if (live_[list]++ == 0) set_nonempty(list, true);
    ++live_count_;
    if (l.items.size() - l.head > 2 * live_[list] + kSlack) compact(l);
  }
  // Drops a list's stale items, keeping the order of the others.
  void compact(List& l) {
    l.items.erase(l.items.begin(), l.items.begin() + std::ptrdiff_t(l.head));
    l.items.erase(std::remove_if(l.items.begin(), l.items.end(), [&](const Item& i) { return !is_current(i); }),
                  l.items.end());
    l.head = 0;
  }
  // Every list compacted, and a capacity above twice its size plus kSlack cut
  // to 1.5 times: then the lists take at most two items per slot plus
  // kLists * kSlack, half their budget, so this runs rarely.
  void compact_all() {
    item_capacity_ = 0;
    for (List& l : lists_) {
      compact(l);
      if (l.items.capacity() > 2 * l.items.size() + kSlack) {
        std::vector<Item> smaller;
        smaller.reserve(l.items.size() + l.items.size() / 2 + kSlack);
        smaller.assign(l.items.begin(), l.items.end());
        l.items.swap(smaller);
      }
      item_capacity_ += l.items.capacity();
    }
  }
  void remove(int64_t slot) {
    SlotState& state = state_[slot];
    if (state.list == kAbsent) return;
    if (--live_[state.list] == 0) set_nonempty(state.list, false);
    --live_count_;
    state.list = kAbsent;
    ++state.version;  // its item is stale now
  }
  // The oldest current item of a first-in-first-out list (it has one).
  int64_t front(int list) {
    List& l = lists_[list];
    while (!is_current(l.items[l.head])) ++l.head;
    return l.items[l.head].slot;
  }
  // The newest current item of a list (it has one).
  int64_t back(int list) {
    List& l = lists_[list];
    while (!is_current(l.items.back())) l.items.pop_back();
    return l.items.back().slot;
  }

  const EvictionPolicy& policy_;
  std::vector<SlotState> state_;  // by slot
  std::array<List, kLists> lists_;
  std::array<size_t, kLists + 1> live_{};  // current items per list, and in the heap
  std::vector<HeapItem> heap_;             // no known use, frequency not a small whole count
  uint64_t nonempty_ring_[kRing / 64] = {};
  uint64_t nonempty_frequency_ = 0;
  size_t live_count_ = 0;
  size_t item_capacity_ = 0;  // the lists' capacities together
  size_t reserved_ = 0;       // slots reserved for
  int64_t now_ = 0;
};

}  // namespace

EvictionQueue::EvictionQueue(const EvictionPolicy& policy) {
  if (std::string(policy.name()) == "lookahead") {
    order_ = std::make_unique<LookaheadOrder>(policy);
  } else {
    order_ = std::make_unique<HeapOrder>(policy);
  }
}
EvictionQueue::~EvictionQueue() = default;
EvictionQueue::EvictionQueue(EvictionQueue&&) noexcept = default;
EvictionQueue& EvictionQueue::operator=(EvictionQueue&&) noexcept = default;

void EvictionQueue::update(int64_t slot, const RowUsage& usage) { order_->update(slot, usage); }
void EvictionQueue::erase(int64_t slot) { order_->erase(slot); }
bool EvictionQueue::contains(int64_t slot) const { return order_->contains(slot); }
int64_t EvictionQueue::peek_victim() { return order_->peek_victim(); }
size_t EvictionQueue::size() const { return order_->size(); }
void EvictionQueue::prefetch(int64_t slot) const { order_->prefetch(slot); }
void EvictionQueue::set_now(int64_t round) { order_->set_now(round); }
void EvictionQueue::reserve(int64_t slots) { order_->reserve(static_cast<size_t>(std::max<int64_t>(slots, 0))); }
size_t EvictionQueue::bytes_for(int64_t slots) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(slots, 0));
  return std::max(n * HeapOrder::bytes_per_slot() + ScoredHeap::max_items(n) * sizeof(ScoredHeap::Item),
                  LookaheadOrder::bytes_for(n));
}

}  // namespace strata::store
