#include "store/eviction_policy.hpp"

#include <algorithm>
#include <cmath>

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

void EvictionQueue::update(int64_t slot, const RowUsage& usage) {
  if (static_cast<size_t>(slot) >= live_.size()) {
    const size_t n = std::max<size_t>(slot + 1, live_.size() * 2);
    live_.resize(n, 0);
    version_.resize(n, 0);
  }
  if (!live_[slot]) {
    live_[slot] = 1;
    ++live_count_;
  }
  heap_.push_back(Item{policy_.score(usage), slot, ++version_[slot]});
  std::push_heap(heap_.begin(), heap_.end(), leaves_later);
  if (heap_.size() > 2 * live_count_ + 4096) compact();
}

void EvictionQueue::erase(int64_t slot) {
  if (!contains(slot)) return;
  live_[slot] = 0;
  ++version_[slot];
  --live_count_;
}

int64_t EvictionQueue::peek_victim() {
  while (!heap_.empty() && !is_current(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), leaves_later);
    heap_.pop_back();
  }
  return heap_.empty() ? -1 : heap_.front().slot;
}

// Drops every stale item and rebuilds the heap in O(n).
void EvictionQueue::compact() {
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const Item& item) { return !is_current(item); }),
              heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), leaves_later);
}

}  // namespace strata::store
