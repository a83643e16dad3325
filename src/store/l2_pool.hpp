// L2Pool: one host-memory pool for the L2 tiers of co-trained models on a node
// ([models] l2_pool_mb, docs/MULTI_MODEL.md "One host pool"). Each tiered
// producer of the node holds a grant from the pool, within its model's
// store.l2_min_mb and store.l2_max_mb. Every few rounds a producer reports
// what its ghost rows saw (store/ghost_rows.hpp: misses that more rows would
// have saved), and whichever producer takes the pool's lock first decides for
// all: free memory goes to the grant with the most ghost hits per sample per
// byte, and when none is free, a step moves to it from the grant whose held
// bytes buy the fewest L2 hits per sample per byte, if the gain beats that by
// 25 %. Below its first grant (a static equal split's share) a member lends only
// space its L2 leaves empty while its L2 is not filling and its L1 will not
// fill soon, and takes it back first once full, so no model ends worse off
// than with the split. A grant is lowered before anything is given out of it,
// so the grants in force never add up to more than the pool. Caching never
// changes the numbers, so no decision can break exactness.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::store {

struct L2PoolMember {
  bool tiered = false;  // ps producers hold no grant
  double min_mb = 0;
  double max_mb = 0;    // 0: the whole pool
};

// First grants: every member at its floor, then the rest shared out equally up
// to the caps. Throws strata::Error when the floors add up to more than the pool.
std::vector<double> initial_l2_grants(double pool_mb, const std::vector<L2PoolMember>& members);

class L2Pool {
 public:
  static size_t bytes_needed(int consumers);
  // Lays the ledger out in zeroed shared memory, with every member's first grant.
  static void initialize(void* memory, double pool_mb, const std::vector<L2PoolMember>& members,
                         double decide_every_s = 0.25);
  L2Pool(void* memory, int consumers, int me);

  double pool_mb() const;
  double granted_mb() const;  // this member's grant now
  double max_mb() const;      // the most it may be granted (its arena)
  // This member's ghost hits, L2 hits and samples so far (cumulative), the
  // bytes of its ghost rows, the bytes its L2 holds now, and the rows its L1s
  // hold now and can hold; may decide for everyone. Returns this member's grant.
  double report(uint64_t ghost_hits, uint64_t l2_hits, uint64_t samples, int64_t ghost_rows, int64_t row_bytes,
                int64_t held_bytes, int64_t l1_rows, int64_t l1_capacity_rows);
  // This member now holds `mb` (after shrinking or growing its L2).
  void applied(double mb);
  // This member holds nothing more (training is over): its grant returns to the pool.
  void leave();
  int64_t decisions() const;  // decisions taken by this member
  int64_t moves() const;      // grant changes it made for anyone

 private:
  struct Header;
  struct Entry;
  void decide();

  Header* header_;
  Entry* entries_;
  int consumers_;
  int me_;
  int64_t decisions_ = 0, moves_ = 0;
};

}  // namespace strata::store
