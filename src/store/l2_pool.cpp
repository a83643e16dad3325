#include "store/l2_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "common/error.hpp"

namespace strata::store {
namespace {

constexpr double kMiB = 1048576.0;
// A step moves this share of the pool; a move needs the receiver's marginal
// benefit this much above the donor's.
constexpr double kStepShare = 0.05;
constexpr double kMoveMargin = 1.25;
// Below its first grant (what a static equal split gives it) a member lends only
// space its L2 leaves empty while its L2 is not filling and its L1 will not fill
// soon (a full L1 evicts into the L2), and a member below it whose L2 is full
// and whose ghosts hit takes memory back first. So sharing never leaves a model
// worse off than the split. "Soon": the L1's room would last fewer windows than
// this at the pace it grew in the last one.
constexpr double kFillHorizonWindows = 40;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct L2Pool::Header {
  int64_t pool_bytes;
  int64_t decide_every_ns;
  std::atomic<int64_t> lock;
  std::atomic<int64_t> last_decision_ns;
};

struct alignas(64) L2Pool::Entry {
  std::atomic<int64_t> active;   // 1: a tiered producer that holds a grant
  std::atomic<int64_t> granted;  // bytes
  std::atomic<int64_t> applied;  // bytes its L2 holds now
  int64_t min_bytes, max_bytes;
  int64_t fair_bytes;  // its first grant
  std::atomic<int64_t> ghost_hits, l2_hits, samples, ghost_bytes, held_bytes, l1_rows, l1_capacity_rows;
  int64_t seen_hits, seen_l2_hits, seen_samples;  // the deciders' last look (under the lock)
  double benefit, value;                          // and what they measured then (-1 not yet)
  int64_t seen_held, seen_l1_rows;                // at the window before (-1 not yet)
  bool filling;                                   // its L2 grew in the last window, or its L1 fills soon
};

std::vector<double> initial_l2_grants(double pool_mb, const std::vector<L2PoolMember>& members) {
  std::vector<double> grants(members.size(), 0);
  double floors = 0;
  int tiered = 0;
  for (const L2PoolMember& m : members) {
    if (!m.tiered) continue;
    floors += m.min_mb, ++tiered;
    const double cap = m.max_mb > 0 ? m.max_mb : pool_mb;
    if (m.min_mb > cap) {
      throw Error("store.l2_min_mb = " + std::to_string(m.min_mb) + " is above store.l2_max_mb = " +
                      std::to_string(cap) + " (MiB) for a model in the shared L2 pool",
                  "set store.l2_min_mb <= store.l2_max_mb");
    }
  }
  if (floors > pool_mb + 1e-9) {
    throw Error("the tiered producers' store.l2_min_mb on this node add up to " + std::to_string(floors) +
                    " MiB, more than [models] l2_pool_mb = " + std::to_string(pool_mb),
                "raise models.l2_pool_mb or lower the models' store.l2_min_mb");
  }
  double left = pool_mb - floors;
  for (size_t i = 0; i < members.size(); ++i) grants[i] = members[i].tiered ? members[i].min_mb : 0;
  // Water-filling: equal shares of what is left, up to each cap.
  for (int round = 0; round < tiered && left > 1e-9; ++round) {
    int open = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const double cap = members[i].max_mb > 0 ? members[i].max_mb : pool_mb;
      if (members[i].tiered && grants[i] < cap - 1e-9) ++open;
    }
    if (open == 0) break;
    const double share = left / open;
    for (size_t i = 0; i < members.size(); ++i) {
      const double cap = members[i].max_mb > 0 ? members[i].max_mb : pool_mb;
      if (!members[i].tiered || grants[i] >= cap - 1e-9) continue;
      const double add = std::min(share, cap - grants[i]);
      grants[i] += add, left -= add;
    }
  }
  return grants;
}

size_t L2Pool::bytes_needed(int consumers) { return sizeof(Header) + 64 + sizeof(Entry) * size_t(consumers); }

void L2Pool::initialize(void* memory, double pool_mb, const std::vector<L2PoolMember>& members,
                        double decide_every_s) {
  std::memset(memory, 0, bytes_needed(int(members.size())));
  auto* header = new (memory) Header{};
  header->pool_bytes = int64_t(pool_mb * kMiB);
  header->decide_every_ns = int64_t(decide_every_s * 1e9);
  header->lock.store(0);
  header->last_decision_ns.store(0);
  const std::vector<double> grants = initial_l2_grants(pool_mb, members);
  char* base = static_cast<char*>(memory) + ((sizeof(Header) + 63) & ~size_t(63));
  for (size_t i = 0; i < members.size(); ++i) {
    auto* e = new (base + sizeof(Entry) * i) Entry{};
    e->active.store(members[i].tiered ? 1 : 0);
    e->granted.store(int64_t(grants[i] * kMiB));
    e->applied.store(int64_t(grants[i] * kMiB));
    e->min_bytes = int64_t(members[i].min_mb * kMiB);
    e->max_bytes = int64_t((members[i].max_mb > 0 ? std::min(members[i].max_mb, pool_mb) : pool_mb) * kMiB);
    e->fair_bytes = int64_t(grants[i] * kMiB);
    e->benefit = e->value = -1;
    e->seen_held = e->seen_l1_rows = -1;
  }
}

L2Pool::L2Pool(void* memory, int consumers, int me) : consumers_(consumers), me_(me) {
  header_ = static_cast<Header*>(memory);
  entries_ = reinterpret_cast<Entry*>(static_cast<char*>(memory) + ((sizeof(Header) + 63) & ~size_t(63)));
}

double L2Pool::pool_mb() const { return double(header_->pool_bytes) / kMiB; }
double L2Pool::granted_mb() const { return double(entries_[me_].granted.load(std::memory_order_acquire)) / kMiB; }
double L2Pool::max_mb() const { return double(entries_[me_].max_bytes) / kMiB; }
int64_t L2Pool::decisions() const { return decisions_; }
int64_t L2Pool::moves() const { return moves_; }

double L2Pool::report(uint64_t ghost_hits, uint64_t l2_hits, uint64_t samples, int64_t ghost_rows,
                      int64_t row_bytes, int64_t held_bytes, int64_t l1_rows, int64_t l1_capacity_rows) {
  Entry& mine = entries_[me_];
  mine.held_bytes.store(held_bytes, std::memory_order_relaxed);
  mine.l1_rows.store(l1_rows, std::memory_order_relaxed);
  mine.l1_capacity_rows.store(l1_capacity_rows, std::memory_order_relaxed);
  mine.ghost_hits.store(int64_t(ghost_hits), std::memory_order_relaxed);
  mine.l2_hits.store(int64_t(l2_hits), std::memory_order_relaxed);
  mine.samples.store(int64_t(samples), std::memory_order_relaxed);
  mine.ghost_bytes.store(ghost_rows * row_bytes, std::memory_order_release);
  const int64_t now = now_ns();
  if (now - header_->last_decision_ns.load(std::memory_order_acquire) >= header_->decide_every_ns &&
      header_->lock.exchange(1, std::memory_order_acq_rel) == 0) {
    if (now - header_->last_decision_ns.load(std::memory_order_acquire) >= header_->decide_every_ns) {
      decide();
      header_->last_decision_ns.store(now, std::memory_order_release);
    }
    header_->lock.store(0, std::memory_order_release);
  }
  return granted_mb();
}

void L2Pool::applied(double mb) { entries_[me_].applied.store(int64_t(mb * kMiB), std::memory_order_release); }

void L2Pool::leave() {
  Entry& mine = entries_[me_];
  // Under the lock, so that a decider does not hand out this grant while reading it.
  while (header_->lock.exchange(1, std::memory_order_acq_rel) != 0) {
  }
  mine.active.store(0, std::memory_order_release);
  mine.granted.store(0, std::memory_order_release);
  mine.applied.store(0, std::memory_order_release);
  header_->lock.store(0, std::memory_order_release);
}

void L2Pool::decide() {
  ++decisions_;
  const int64_t step = std::max<int64_t>(int64_t(double(header_->pool_bytes) * kStepShare), 1);
  int64_t held = 0;
  // What more memory would buy (ghost hits per sample per ghost byte), and
  // what the memory held buys now (L2 hits per sample per byte held: for a
  // concave hit curve at least what its last bytes buy); -1 unknown.
  std::vector<double> benefit(size_t(consumers_), -1), value(size_t(consumers_), -1);
  for (int i = 0; i < consumers_; ++i) {
    Entry& e = entries_[i];
    if (!e.active.load(std::memory_order_acquire)) continue;
    const int64_t applied = e.applied.load();
    held += std::max(e.granted.load(), applied);
    const int64_t hits = e.ghost_hits.load(std::memory_order_relaxed);
    const int64_t l2_hits = e.l2_hits.load(std::memory_order_relaxed);
    const int64_t samples = e.samples.load(std::memory_order_relaxed);
    const int64_t bytes = e.ghost_bytes.load(std::memory_order_acquire);
    if (samples > e.seen_samples && bytes > 0) {
      const double window = double(samples - e.seen_samples);
      e.benefit = double(hits - e.seen_hits) / window / double(bytes);
      e.value = applied > 0 ? double(l2_hits - e.seen_l2_hits) / window / double(applied) : 0.0;
      const int64_t held_now = e.held_bytes.load(std::memory_order_relaxed);
      const int64_t l1_now = e.l1_rows.load(std::memory_order_relaxed);
      const int64_t l1_room = e.l1_capacity_rows.load(std::memory_order_relaxed) - l1_now;
      const int64_t l1_growth = e.seen_l1_rows < 0 ? l1_now : l1_now - e.seen_l1_rows;
      e.filling = e.seen_held < 0 || held_now > e.seen_held || l1_room <= 0 ||
                  double(l1_room) < kFillHorizonWindows * double(std::max<int64_t>(l1_growth, 0));
      e.seen_held = held_now, e.seen_l1_rows = l1_now;
      e.seen_hits = hits, e.seen_l2_hits = l2_hits, e.seen_samples = samples;
    }
    benefit[size_t(i)] = e.benefit, value[size_t(i)] = e.value;  // its newest window
  }
  const int64_t free = header_->pool_bytes - held;
  // Lowers the donor first; what it frees is given out at a later decision, once applied.
  auto take_step_from = [&](int donor) {
    entries_[donor].granted.fetch_sub(step, std::memory_order_acq_rel);
    ++moves_;
  };
  auto give = [&](Entry& r, int64_t most) {
    const int64_t bytes = std::min({step, free, most, r.max_bytes - r.granted.load()});
    if (bytes <= 0) return false;
    r.granted.fetch_add(bytes, std::memory_order_acq_rel);
    ++moves_;
    return true;
  };
  // What a member below its first grant may lend: space its L2 leaves empty
  // and has stopped filling.
  auto may_lend_below_fair = [&](const Entry& e) {
    return !e.filling && e.granted.load() - step >= e.held_bytes.load(std::memory_order_relaxed);
  };
  // 1. Fairness first: a member below its first grant whose L2 is full and
  // whose ghosts hit takes memory back up to that grant, from free memory or
  // from a member above its own.
  int owed = -1;
  for (int i = 0; i < consumers_; ++i) {
    const Entry& e = entries_[i];
    const bool full = e.granted.load() - step < e.held_bytes.load(std::memory_order_relaxed);  // < a step empty
    if (benefit[size_t(i)] <= 0 || !full) continue;
    if (e.granted.load() >= std::min(e.fair_bytes, e.max_bytes)) continue;
    if (owed < 0 || benefit[size_t(i)] > benefit[size_t(owed)]) owed = i;
  }
  if (owed >= 0) {
    // All it is owed at once, not in steps: every decision it waits costs it misses.
    Entry& r = entries_[owed];
    const int64_t owed_bytes = std::min(r.fair_bytes, r.max_bytes) - r.granted.load();
    if (free > 0) {
      const int64_t bytes = std::min(free, owed_bytes);
      r.granted.fetch_add(bytes, std::memory_order_acq_rel);
      ++moves_;
      return;
    }
    int donor = -1;
    for (int i = 0; i < consumers_; ++i) {
      const Entry& e = entries_[i];
      if (i == owed || e.granted.load() <= std::max(e.fair_bytes, e.min_bytes)) continue;
      if (donor < 0 || value[size_t(i)] < value[size_t(donor)]) donor = i;
    }
    if (donor >= 0) {
      Entry& d = entries_[donor];
      const int64_t bytes = std::min(owed_bytes, d.granted.load() - std::max(d.fair_bytes, d.min_bytes));
      d.granted.fetch_sub(bytes, std::memory_order_acq_rel);  // given out once applied
      ++moves_;
    }
    return;
  }
  // 2. Free memory to the largest gain; else a step from the memory that buys
  // least, when the gain beats it (below a first grant: only memory left idle).
  int receiver = -1, donor = -1;
  for (int i = 0; i < consumers_; ++i) {
    const Entry& e = entries_[i];
    if (benefit[size_t(i)] <= 0) continue;
    if (e.granted.load() >= e.max_bytes) continue;
    if (receiver < 0 || benefit[size_t(i)] > benefit[size_t(receiver)]) receiver = i;
  }
  if (receiver < 0) return;
  if (free > 0) {
    give(entries_[receiver], step);
    return;
  }
  for (int i = 0; i < consumers_; ++i) {
    const Entry& e = entries_[i];
    if (i == receiver || value[size_t(i)] < 0 || e.granted.load() - step < e.min_bytes) continue;
    if (e.granted.load() - step < e.fair_bytes && !may_lend_below_fair(e)) continue;
    if (donor < 0 || value[size_t(i)] < value[size_t(donor)]) donor = i;
  }
  if (donor >= 0 && benefit[size_t(receiver)] > kMoveMargin * value[size_t(donor)] + 1e-15) take_step_from(donor);
}

}  // namespace strata::store
