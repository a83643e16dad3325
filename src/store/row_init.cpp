#include "store/row_init.hpp"

#include "common/rng.hpp"

namespace strata::store {

void init_row_values(uint32_t table, uint64_t key, uint64_t seed, float scale, float* out, int dim) {
  const uint64_t base = mix64(seed, key, table);
  for (int i = 0; i < dim; ++i) {
    float u = to_unit_float(mix64(base + static_cast<uint64_t>(i)));  // [0, 1)
    out[i] = (2.0f * u - 1.0f) * scale;
  }
}

}  // namespace strata::store
