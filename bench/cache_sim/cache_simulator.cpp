// Cache simulator: replays a key-access trace written by `strata trace` and
// prints the hit rate of each eviction policy at given capacities, beside
// Belady's MIN (full knowledge of the future), the optimal policy. The policies
// are strata's own (store/eviction_policy.hpp); only MIN is written here.
//
// usage: bench_cache_simulator TRACE [--depth D] [--horizon H] [--capacities 0.01,0.05,0.1]
//
// Each owner's L1 is simulated on its own, with capacity = fraction x that
// owner's distinct rows. A round's rows are pinned while the round is served
// (as in strata's L1); one access = one unique row of one round. As in strata's
// producer, a row's access history (store/count_min_sketch.hpp) counts every
// round that needs it from the moment that round enters the look-ahead window,
// and seeds the policy's frequency when the row enters the cache.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.hpp"
#include "store/access_trace.hpp"
#include "store/count_min_sketch.hpp"
#include "store/eviction_policy.hpp"
#include "store/row_cache.hpp"

using strata::store::EvictionPolicy;
using strata::store::EvictionQueue;
using strata::store::RowId;
using strata::store::RowIdHash;
using strata::store::RowUsage;

namespace {

struct OwnerTrace {
  std::vector<std::vector<RowId>> rounds;  // unique rows per round, in round order
  size_t distinct = 0;
};

struct Result {
  uint64_t hits = 0;
  uint64_t accesses = 0;
};

// horizon < 0: Belady (the whole future is known). window: rounds known ahead
// (prefetch depth + horizon), which is when the access history counts a round.
Result simulate(const OwnerTrace& trace, const std::string& policy_name, size_t capacity, int horizon, int window) {
  auto policy = strata::store::make_eviction_policy(policy_name == "belady" ? "lookahead" : policy_name);
  const bool knows_future = policy_name == "lookahead" || policy_name == "belady";
  const int64_t rounds = static_cast<int64_t>(trace.rounds.size());
  // next_at[r][i]: the next round after r that uses trace.rounds[r][i].
  std::vector<std::vector<int64_t>> next_at(rounds);
  {
    std::unordered_map<RowId, int64_t, RowIdHash> next;
    for (int64_t r = rounds - 1; r >= 0; --r) {
      next_at[r].resize(trace.rounds[r].size());
      for (size_t i = 0; i < trace.rounds[r].size(); ++i) {
        auto it = next.find(trace.rounds[r][i]);
        next_at[r][i] = it == next.end() ? INT64_MAX : it->second;
        next[trace.rounds[r][i]] = r;
      }
    }
  }
  auto visible = [&](int64_t use, int64_t now) {
    if (!knows_future || use == INT64_MAX) return INT64_MAX;
    if (horizon >= 0 && use - now > horizon) return INT64_MAX;
    return use;
  };
  EvictionQueue queue(*policy);
  std::unordered_map<RowId, int64_t, RowIdHash> slot_of;
  std::vector<RowUsage> usage;
  std::vector<RowId> id_of;
  std::vector<int64_t> known_next;  // per slot: the row's true next use
  std::vector<int64_t> free_slots;
  Result result;
  uint64_t sketch_width = 1 << 16;
  while (sketch_width < capacity && sketch_width < (uint64_t(1) << 22)) sketch_width <<= 1;
  strata::store::AccessHistory history(sketch_width, std::max<uint64_t>(10 * capacity, 1 << 16));
  int64_t recorded_through = -1;
  for (int64_t r = 0; r < rounds; ++r) {
    while (recorded_through < std::min<int64_t>(rounds - 1, r + window)) {
      for (const RowId& id : trace.rounds[++recorded_through]) history.record(id.table, id.key);
    }
    // Uses entering the horizon become visible to the look-ahead policy.
    if (horizon >= 0 && knows_future && r + horizon < rounds) {
      for (const RowId& id : trace.rounds[r + horizon]) {
        auto it = slot_of.find(id);
        if (it == slot_of.end() || !queue.contains(it->second)) continue;
        RowUsage& u = usage[it->second];
        if (u.next_use == INT64_MAX && known_next[it->second] == r + horizon) {
          u.next_use = r + horizon;
          queue.update(it->second, u);
        }
      }
    }
    const auto& rows = trace.rounds[r];
    std::vector<int64_t> pinned;
    for (size_t i = 0; i < rows.size(); ++i) {
      ++result.accesses;
      auto it = slot_of.find(rows[i]);
      int64_t slot;
      if (it != slot_of.end()) {
        ++result.hits;
        slot = it->second;
        queue.erase(slot);
      } else {
        if (slot_of.size() >= capacity) {
          const int64_t victim = queue.peek_victim();
          if (victim < 0) continue;  // the round alone overflows the cache: count a miss, keep nothing
          queue.erase(victim);
          slot_of.erase(id_of[victim]);
          free_slots.push_back(victim);
        }
        if (free_slots.empty()) {
          slot = static_cast<int64_t>(usage.size());
          usage.emplace_back();
          id_of.emplace_back();
          known_next.push_back(INT64_MAX);
        } else {
          slot = free_slots.back();
          free_slots.pop_back();
          usage[slot] = RowUsage{};
        }
        slot_of[rows[i]] = slot;
        id_of[slot] = rows[i];
        policy->admit(usage[slot], history.frequency(rows[i].table, rows[i].key));
      }
      policy->record_access(usage[slot], r);
      known_next[slot] = next_at[r][i];
      usage[slot].next_use = visible(next_at[r][i], r);
      pinned.push_back(slot);
    }
    for (int64_t slot : pinned) queue.update(slot, usage[slot]);
  }
  return result;
}

std::vector<double> parse_fractions(const char* text) {
  std::vector<double> values;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [--depth D] [--horizon H] [--capacities 0.01,0.05,0.1]\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  int depth = 2, horizon = 128;  // strata's defaults (store.prefetch_depth, store.horizon)
  std::vector<double> fractions = {0.01, 0.05, 0.10};
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--depth")) depth = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--horizon")) horizon = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--capacities")) fractions = parse_fractions(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  try {
    auto records = strata::store::read_access_trace(path);
    std::map<int32_t, OwnerTrace> owners;
    for (auto& rec : records) owners[rec.owner].rounds.push_back(std::move(rec.rows));
    for (auto& [owner, trace] : owners) {
      std::unordered_map<RowId, int, RowIdHash> seen;
      for (const auto& round : trace.rounds) {
        for (const auto& id : round) seen.emplace(id, 0);
      }
      trace.distinct = seen.size();
    }
    // The look-ahead policy knows the prefetch window plus the horizon, as in strata.
    const int window = depth + horizon;
    std::printf("trace %s: %zu owners, %zu records; look-ahead window %d rounds\n", path.c_str(), owners.size(),
                records.size(), window);
    const std::vector<std::string> policies = {"lru", "lfu", "lfu_decay", "lookahead", "belady"};
    std::printf("%-10s", "capacity");
    for (const auto& p : policies) std::printf(" %10s", p.c_str());
    std::printf("\n");
    std::vector<std::pair<double, double>> ratios;
    for (double fraction : fractions) {
      std::map<std::string, Result> totals;
      for (const auto& [owner, trace] : owners) {
        const size_t capacity = std::max<size_t>(1, size_t(fraction * double(trace.distinct)));
        for (const auto& p : policies) {
          Result r = simulate(trace, p, capacity, p == "belady" ? -1 : window, window);
          totals[p].hits += r.hits;
          totals[p].accesses += r.accesses;
        }
      }
      std::printf("%8.1f%% ", fraction * 100);
      for (const auto& p : policies) {
        std::printf(" %10.4f", double(totals[p].hits) / double(std::max<uint64_t>(1, totals[p].accesses)));
      }
      std::printf("\n");
      const double min_rate = double(totals["belady"].hits) / double(std::max<uint64_t>(1, totals["belady"].accesses));
      const double look = double(totals["lookahead"].hits) / double(std::max<uint64_t>(1, totals["lookahead"].accesses));
      ratios.emplace_back(fraction, min_rate > 0 ? look / min_rate : 0);
    }
    for (const auto& [fraction, ratio] : ratios) {
      std::printf("ratio lookahead/belady @%.0f%%: %.4f\n", fraction * 100, ratio);
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
