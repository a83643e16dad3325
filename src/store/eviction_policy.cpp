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
  void push(int64_t slot, EvictionPolicy::Score score, std::vector<uint64_t>& version) {
    heap_.push_back(Item{score, slot, ++version[slot]});
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
    heap_.push(slot, policy_.score(usage), version_);
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

// lookahead: see the header. Per slot: where it is (no next use, a round's
// list, or absent) and its list links.
class LookaheadOrder final : public EvictionQueue::Order {
 public:
  explicit LookaheadOrder(const EvictionPolicy& policy) : policy_(policy) { heads_.fill(-1); }
  auto current() const {
    return [this](const ScoredHeap::Item& item) {
      return where_[item.slot] == kNoFuture && version_[item.slot] == item.version;
    };
  }

  void update(int64_t slot, const RowUsage& usage) override {
    grow(slot);
    remove(slot);
    ++live_count_;
    if (usage.next_use == INT64_MAX) {
      where_[slot] = kNoFuture;
      no_future_.push(slot, policy_.score(usage), version_);
      ++no_future_count_;
      no_future_.compact_if_stale(no_future_count_, current());
      return;
    }
    // Past uses (never in a planned level, but a stale one must not alias a
    // future round of the ring) leave last; uses beyond the ring leave first.
    const int64_t round = std::clamp<int64_t>(usage.next_use, now_ - 1, now_ + kRing);
    link(slot, round);
  }
  void erase(int64_t slot) override {
    if (!contains(slot)) return;
    remove(slot);
  }
  bool contains(int64_t slot) const override {
    return slot >= 0 && static_cast<size_t>(slot) < where_.size() && where_[slot] != kAbsent;
  }
  int64_t peek_victim() override {
    const int64_t victim = no_future_.top(current());
    if (victim >= 0) return victim;
    if (heads_[kFar] >= 0) return heads_[kFar];
    // The furthest round of the ring with a row.
    for (int64_t round = now_ + kRing - 1; round >= now_; --round) {
      const int bucket = int(round & (kRing - 1));
      if (!(nonempty_[bucket >> 6] >> (bucket & 63) & 1)) {
        // Skip the rest of an empty 64-bucket word at once.
        if ((nonempty_[bucket >> 6] & ((uint64_t(2) << (bucket & 63)) - 1)) == 0) round -= (bucket & 63);
        continue;
      }
      return heads_[bucket];
    }
    return heads_[kPast];
  }
  size_t size() const override { return live_count_; }
  void prefetch(int64_t slot) const override {
    if (static_cast<size_t>(slot) < where_.size()) __builtin_prefetch(&where_[slot]), __builtin_prefetch(&links_[slot]);
  }
  void set_now(int64_t round) override {
    // Rows of rounds now left behind move to the past list (normally there are none).
    for (int64_t r = now_; r < round && r < now_ + kRing; ++r) {
      const int bucket = int(r & (kRing - 1));
      while (heads_[bucket] >= 0) {
        const int32_t slot = heads_[bucket];
        unlink(slot);
        link(slot, round - 1);
      }
    }
    now_ = std::max(now_, round);
  }
  void reserve(size_t slots) override {
    where_.reserve(slots);
    links_.reserve(slots);
    version_.reserve(slots);
    no_future_.reserve(slots);
  }
  static size_t bytes_per_slot() { return sizeof(int64_t) + sizeof(Links) + sizeof(uint64_t); }

 private:
  static constexpr int64_t kRing = 256;
  static constexpr int kFar = kRing, kPast = kRing + 1;  // extra lists after the ring's
  static constexpr int64_t kAbsent = INT64_MIN, kNoFuture = INT64_MAX;
  struct Links {
    int32_t next = -1, prev = -1;
  };

  void grow(int64_t slot) {
    if (static_cast<size_t>(slot) < where_.size()) return;
    const size_t n = grown_size(size_t(slot), where_.size(), where_.capacity());
    where_.resize(n, kAbsent);
    links_.resize(n);
    version_.resize(n, 0);
  }
  int list_of(int64_t round) const {
    if (round >= now_ + kRing) return kFar;
    if (round < now_) return kPast;
    return int(round & (kRing - 1));
  }
  void link(int64_t slot, int64_t round) {
    const int list = list_of(round);
    where_[slot] = round;
    links_[slot] = {heads_[list], -1};
    if (heads_[list] >= 0) links_[heads_[list]].prev = int32_t(slot);
    heads_[list] = int32_t(slot);
    if (list < kRing) nonempty_[list >> 6] |= uint64_t(1) << (list & 63);
  }
  void unlink(int64_t slot) {
    const int list = list_of(where_[slot]);
    const Links l = links_[slot];
    if (l.prev >= 0) {
      links_[l.prev].next = l.next;
    } else {
      heads_[list] = l.next;
    }
    if (l.next >= 0) links_[l.next].prev = l.prev;
    if (list < kRing && heads_[list] < 0) nonempty_[list >> 6] &= ~(uint64_t(1) << (list & 63));
  }
  void remove(int64_t slot) {
    const int64_t at = where_[slot];
    if (at == kAbsent) return;
    --live_count_;
    if (at == kNoFuture) {
      ++version_[slot];  // its heap item is stale now
      --no_future_count_;
    } else {
      unlink(slot);
    }
    where_[slot] = kAbsent;
  }

  const EvictionPolicy& policy_;
  ScoredHeap no_future_;
  size_t no_future_count_ = 0;
  std::vector<int64_t> where_;     // slot -> next use (its list), kNoFuture or kAbsent
  std::vector<Links> links_;       // slot -> neighbours in its list
  std::vector<uint64_t> version_;  // slot -> version of its no-future heap item
  std::array<int32_t, kRing + 2> heads_;
  uint64_t nonempty_[kRing / 64] = {};
  size_t live_count_ = 0;
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
  const size_t per_slot = std::max(HeapOrder::bytes_per_slot(), LookaheadOrder::bytes_per_slot());
  return n * per_slot + ScoredHeap::max_items(n) * sizeof(ScoredHeap::Item);
}

}  // namespace strata::store
