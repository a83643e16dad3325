// Initial values of a new row: a pure function of (table, key, seed), so a row is
// the same whichever rank or level creates it.
#pragma once

#include <cstdint>

namespace strata::store {

// Writes dim values uniform in [-scale, scale).
void init_row_values(uint32_t table, uint64_t key, uint64_t seed, float scale, float* out, int dim);

}  // namespace strata::store
