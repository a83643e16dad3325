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
  const Item item{policy_.score(usage), slot};
  if (static_cast<size_t>(slot) >= position_.size()) position_.resize(std::max<size_t>(slot + 1, position_.size() * 2), -1);
  int64_t at = position_[slot];
  if (at < 0) {
    heap_.push_back(item);
    position_[slot] = static_cast<int64_t>(heap_.size() - 1);
    sift_up(heap_.size() - 1);
    return;
  }
  const bool lower = item < heap_[at];
  heap_[at] = item;
  if (lower) {
    sift_up(at);
  } else {
    sift_down(at);
  }
}

void EvictionQueue::erase(int64_t slot) {
  if (!contains(slot)) return;
  const size_t at = static_cast<size_t>(position_[slot]);
  position_[slot] = -1;
  const Item last = heap_.back();
  heap_.pop_back();
  if (at == heap_.size()) return;
  const bool lower = last < heap_[at];
  place(at, last);
  if (lower) {
    sift_up(at);
  } else {
    sift_down(at);
  }
}

void EvictionQueue::sift_up(size_t at) {
  const Item item = heap_[at];
  while (at > 0) {
    const size_t parent = (at - 1) / 2;
    if (!(item < heap_[parent])) break;
    place(at, heap_[parent]);
    at = parent;
  }
  place(at, item);
}

void EvictionQueue::sift_down(size_t at) {
  const Item item = heap_[at];
  const size_t n = heap_.size();
  while (true) {
    size_t child = 2 * at + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < item)) break;
    place(at, heap_[child]);
    at = child;
  }
  place(at, item);
}

}  // namespace strata::store
